"""Which process this is, for the distributed package's modules: the names of :mod:`overt.torchrun`
(where the torchrun environment and the process group's rank are read, once)."""

from __future__ import annotations

from overt.errors import RankZeroError
from overt.torchrun import DistEnv, world

__all__ = ["DistEnv", "RankZeroError", "world", "rank", "world_size", "is_main"]


def rank() -> int:
    """This process's rank in the process group (0 without one)."""
    return world()[0]


def world_size() -> int:
    """The process group's size (1 without one)."""
    return world()[1]


def is_main() -> bool:
    """True on rank 0 (and in a single-process run): the process that writes files and prints."""
    return world()[0] == 0
