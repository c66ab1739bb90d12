"""Data order that derives from (seed, epoch) alone, and loaders built on it.

:class:`EpochSampler` makes the shuffle order a pure function of the run seed
and the epoch, so a resumed run sees the same order; ``skip(n)`` starts the
epoch after the first ``n`` indices without loading them.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import DataLoader, Sampler

from overt.engine.seeding import epoch_seed, seed_worker


class EpochSampler(Sampler[int]):
    """Indices ``0..n-1``, shuffled by ``(seed, epoch)`` when ``shuffle``; resumable."""

    def __init__(self, n: int, *, shuffle: bool = True, seed: int = 0):
        self.n, self.shuffle, self.seed = n, shuffle, seed
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's order and start from its beginning."""
        self.epoch, self.start = epoch, 0

    def skip(self, consumed: int) -> None:
        """Start this epoch after the first ``consumed`` indices (for resuming mid-epoch)."""
        self.start = consumed

    def order(self) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.n)
        g = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        return torch.randperm(self.n, generator=g)

    def __iter__(self) -> Iterator[int]:
        return iter(self.order()[self.start:].tolist())

    def __len__(self) -> int:
        return self.n - self.start


def build_loader(
    dataset: Any,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int,
    num_workers: int = 0,
    pin_memory: bool = False,
    collate_fn: Callable[[list[Any]], Any] | None = None,
) -> DataLoader:
    """A DataLoader over ``dataset`` with an :class:`EpochSampler` and seeded workers."""
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=EpochSampler(len(dataset), shuffle=shuffle, seed=seed),
        num_workers=num_workers,
        pin_memory=pin_memory,
        collate_fn=collate_fn,
        worker_init_fn=seed_worker if num_workers else None,
        generator=generator,
    )


def set_loader_epoch(loader: Any, epoch: int, seed: int) -> None:
    """Tell the loader's sampler the epoch (ours or DistributedSampler) and reseed
    its worker generator, so epoch ``e`` loads the same way in a fresh process."""
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    generator = getattr(loader, "generator", None)
    if isinstance(generator, torch.Generator):
        generator.manual_seed(epoch_seed(seed, epoch) ^ 0x5EED)


def batch_sizes(loader: Any) -> list[int] | None:
    """Sizes of every batch the loader yields in one full epoch, when they can be
    known in advance (a plain batch_size over a sized sampler); else ``None``."""
    bs = getattr(loader, "batch_size", None)
    sampler = getattr(loader, "sampler", None)
    if bs is None or sampler is None:
        return None
    try:
        n = sampler.n if isinstance(sampler, EpochSampler) else len(sampler)
    except TypeError:
        return None
    full, rest = divmod(n, bs)
    if getattr(loader, "drop_last", False) or rest == 0:
        return [bs] * full
    return [bs] * full + [rest]


def num_batches(loader: Any) -> int | None:
    """Batches in one full epoch, or ``None`` for unsized loaders."""
    sizes = batch_sizes(loader)
    if sizes is not None:
        return len(sizes)
    try:
        return len(loader)
    except TypeError:
        return None


def steps_per_epoch(loader: Any, accumulate: int) -> int | None:
    n = num_batches(loader)
    return None if n is None else math.ceil(n / accumulate)
