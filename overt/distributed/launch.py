"""``overt train recipe.py nproc=N``: start N workers with torchrun's elastic agent, in this process.

The agent is PyTorch's own (``torch.distributed.run``, what the ``torchrun`` command runs): it
picks a free port for a single-node rendezvous, starts ``python -m overt train ...`` N times
with ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` set, watches them,
and on SIGTERM/SIGINT to this process forwards the signal to every worker (they agree on a
step, save and exit).  Running the agent in-process (not as a ``torchrun`` subprocess) lets
overt read each worker's exit code from the agent's result, so ``overt train ... nproc=N``
exits like a single-process run: 0 when finished, ``128 + N`` after a clean stop on signal N,
1 when a worker failed (its rank and error are printed).
"""

from __future__ import annotations

import signal
import sys

from overt.errors import ConfigError

LAUNCH_KEYS = ("nproc",)


def split_launch_overrides(overrides: list[str]) -> tuple[int | None, list[str]]:
    """``(nproc, the other overrides)`` from ``key=value`` overrides."""
    nproc, rest = None, []
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip() == "nproc":
            try:
                nproc = int(value)
            except ValueError:
                raise ConfigError(f"nproc={value!r} is not a number of processes", fix="write e.g. nproc=2") from None
            if nproc < 1:
                raise ConfigError(f"nproc={nproc}: at least one process is needed", fix="write e.g. nproc=2")
        else:
            rest.append(item)
    return nproc, rest


def exit_code_of(failures: dict[int, int]) -> int:
    """One exit status for the job from the failed workers' exit codes (``rank -> code``): the
    preemption status ``128 + N`` when every failure is a clean stop (or a kill) on a signal,
    else 1."""
    codes = list(failures.values())
    stops = [c - 128 for c in codes if 128 < c < 128 + 65]
    kills = [-c for c in codes if c < 0]
    if codes and len(stops) + len(kills) == len(codes) and stops:
        return 128 + max(stops)
    if codes and len(kills) == len(codes):
        return 128 + max(kills)
    return 1


def launch(nproc: int, overt_argv: list[str]) -> int:
    """Run ``python -m overt *overt_argv`` on ``nproc`` local workers under torchrun's agent."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    args = torchrun.parse_args(["--nproc_per_node", str(nproc), "-m", "overt", *overt_argv])
    try:
        torchrun.run(args)
    except ChildFailedError as exc:
        failures = {rank: f.exitcode for rank, f in exc.failures.items()}
        code = exit_code_of(failures)
        if code == 1:
            lines = [f"  rank {rank}: exit code {c}" for rank, c in sorted(failures.items())]
            print("overt: a worker failed (its error is above):\n" + "\n".join(lines), file=sys.stderr, flush=True)
        return code
    except SignalException as exc:  # the agent was signalled; the workers got the signal and have exited
        return 128 + int(getattr(exc, "sigval", signal.SIGTERM))
    return 0
