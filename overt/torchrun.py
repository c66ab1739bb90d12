"""Which process this is, read in one place: :class:`Topology` (rank, world size, rank on this
node, ``is_main``), built from what torchrun tells each worker process (:class:`DistEnv`, the
environment, before any process group exists) or from the initialised process group.

Every other module asks a :class:`Topology` (a run's is ``trainer.parallel.topology``, built once
when the run is); none reads ``RANK``/``WORLD_SIZE``, ``dist.get_rank()`` or
``dist.get_world_size()`` itself (``tests/engine/test_layering.py`` checks it; the process group's
lifecycle in :mod:`overt.distributed.group` is the other owner).

Importing it imports neither torch nor anything of overt above its errors, so any layer can ask
(the guards, the command line, the composition, the parallel protocol).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from overt.errors import ConfigError


@dataclass(frozen=True)
class DistEnv:
    """What torchrun (or SLURM through torchrun) tells each worker process."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    #: whether torchrun started this process (it sets ``WORLD_SIZE``, also to 1)
    launched: bool = False

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> DistEnv:
        """Read ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE`` (set by torchrun).
        Without them: a single process."""
        env = os.environ if environ is None else environ

        def read(name: str, default: int) -> int:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"environment variable {name}={raw!r} is not an integer",
                                  why="torchrun sets it to the worker's rank / the number of workers",
                                  fix="launch with torchrun (or unset it for a single-process run)") from None

        world = read("WORLD_SIZE", 1)
        rank = read("RANK", 0)
        return cls(rank=rank, local_rank=read("LOCAL_RANK", rank), world_size=world,
                   local_world_size=read("LOCAL_WORLD_SIZE", world), launched="WORLD_SIZE" in env)


@dataclass(frozen=True)
class Topology:
    """Which process this is: ``rank`` of ``world_size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    #: whether torchrun started this process (its environment is set, also for one process)
    under_torchrun: bool = False

    @property
    def is_main(self) -> bool:
        """The process that writes files and prints (rank 0; the only one in a single-process run)."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether several processes train the run."""
        return self.world_size > 1

    @classmethod
    def of_process(cls) -> Topology:
        """This process: the initialised process group's rank and size, or before one exists,
        torchrun's environment (a single process without either)."""
        env = DistEnv.from_environ()
        rank, size = _group() or (env.rank, env.world_size)
        return cls(rank=rank, world_size=size, local_rank=env.local_rank, under_torchrun=env.launched)

    @classmethod
    def of_group(cls) -> Topology:
        """The initialised process group's rank and size (a single process without one): what a
        collective spans."""
        group = _group()
        if group is None and cls is Topology:
            return _SINGLE  # (immutable: one instance serves every caller; the guards ask per checked step)
        rank, size = group or (0, 1)
        return cls(rank=rank, world_size=size)


_SINGLE = Topology()


def _group() -> tuple[int, int] | None:
    """(rank, size) of the initialised default process group, None without one (never imports
    torch: without ``torch.distributed`` imported there can be no group)."""
    if "torch.distributed" not in sys.modules:
        return None
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None
