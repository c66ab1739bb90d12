"""Which process this is, asked in one place: what torchrun tells each worker process
(:class:`DistEnv`, from the environment, before any process group exists) and the rank and
size of the initialised process group (:func:`world`).

Importing it imports neither torch nor anything of overt above its errors, so any layer can ask
(the guards, the command line, the composition, the parallel protocol).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from overt.errors import ConfigError


@dataclass(frozen=True)
class DistEnv:
    """What torchrun (or SLURM through torchrun) tells each worker process."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

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
                   local_world_size=read("LOCAL_WORLD_SIZE", world))


def world() -> tuple[int, int]:
    """(rank, world size) of the initialised default process group; (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
