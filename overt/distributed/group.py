"""Process group lifecycle: initialise from the torchrun environment, tear down on every exit path.

- backend: ``nccl`` when training on CUDA, ``gloo`` otherwise (CPU);
- device: ``cuda:LOCAL_RANK`` (set as the current CUDA device) when CUDA is used, else the CPU;
- teardown: :func:`process_group` destroys the group when the block ends, normally, on an
  exception, or on ``SystemExit`` from a signal handler; a failing rank names itself on stderr.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import timedelta
from typing import Iterator

import torch

from overt.errors import RankZeroError
from overt.torchrun import DistEnv
from overt.errors import ConfigError


def backend_for(device: torch.device) -> str:
    """The collective backend for a training device: nccl on CUDA, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


def device_for(env: DistEnv, spec: str = "auto") -> torch.device:
    """The device of this worker: ``auto`` -> ``cuda:LOCAL_RANK`` when CUDA is available, else cpu;
    ``cuda`` (no index) -> ``cuda:LOCAL_RANK``; anything else as given."""
    if spec in ("auto", "cuda") and torch.cuda.is_available():
        if env.local_rank >= torch.cuda.device_count():
            raise ConfigError(f"LOCAL_RANK={env.local_rank} but this node has {torch.cuda.device_count()} CUDA devices",
                              fix="start at most one process per GPU (torchrun --nproc_per_node <= GPUs)")
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        return device
    if spec == "cuda":
        raise ConfigError("device=cuda was asked for, but CUDA is not available here",
                          fix="use device=auto or device=cpu")
    if spec in ("auto", "cpu"):
        return torch.device("cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def init_from_env(device_spec: str = "auto", env: DistEnv | None = None,
                  timeout_s: float | None = None) -> tuple[DistEnv, torch.device, bool]:
    """Initialise the default process group when torchrun says ``WORLD_SIZE > 1`` and none exists.

    Returns ``(env, device, initialised_here)``.  Rendezvous comes from the environment
    (``MASTER_ADDR``/``MASTER_PORT``, set by torchrun)."""
    import torch.distributed as dist

    env = env or DistEnv.from_environ()
    if not env.distributed:
        from overt.engine.device import pick_device

        return env, pick_device(device_spec), False
    if not dist.is_available():
        raise ConfigError(f"WORLD_SIZE={env.world_size} but this torch build has no torch.distributed",
                          fix="install a torch build with distributed support")
    device = device_for(env, device_spec)
    if dist.is_initialized():
        return env, device, False
    kwargs = {}
    if timeout_s is not None:
        kwargs["timeout"] = timedelta(seconds=timeout_s)
    if device.type == "cuda":
        kwargs["device_id"] = device  # binds the communicator to this GPU (eager NCCL init)
    dist.init_process_group(backend=backend_for(device), **kwargs)
    return env, device, True


def teardown(ok: bool = True) -> None:
    """Destroy the default process group.  After a clean run every rank first meets at a barrier,
    so no rank exits (and makes torchrun stop the others) while rank 0 still writes files."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    if ok:
        try:
            dist.barrier()
        except Exception:  # a peer is gone: nothing to wait for
            pass
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(device_spec: str = "auto") -> Iterator[tuple[DistEnv, torch.device]]:
    """``with process_group() as (env, device): ...`` -- init from torchrun's environment (when
    distributed), destroy the group however the block ends.  An error is printed with the rank."""
    env, device, owned = init_from_env(device_spec)
    ok = False
    try:
        yield env, device
        ok = True
    except BaseException as error:
        from overt.errors import OvertError

        if env.distributed and not isinstance(error, (SystemExit, KeyboardInterrupt, OvertError, RankZeroError)):
            print(f"overt: rank {env.rank} of {env.world_size} failed: {type(error).__name__}: {error}",
                  file=sys.stderr, flush=True)
        raise
    finally:
        if owned:
            teardown(ok)


def on_rank0(fn, *args):  # type: ignore[no-untyped-def]
    """``fn(*args)`` on rank 0 only (e.g. claiming the run directory); every rank returns its result,
    and when it raised, every rank raises: rank 0 the error itself, the others :class:`RankZeroError`
    (so the job stops together instead of hanging in the next collective).  Without a process
    group: just ``fn(*args)``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return fn(*args)
    box: list = [None, None]
    error: BaseException | None = None
    if dist.get_rank() == 0:
        try:
            box[0] = fn(*args)
        except BaseException as exc:  # told to the others, then raised here
            error = exc
            box[1] = f"{type(exc).__name__}: {exc}"
    dist.broadcast_object_list(box, src=0)
    if error is not None:
        raise error
    if box[1] is not None:
        raise RankZeroError(f"rank 0 failed: {box[1]}")
    return box[0]
