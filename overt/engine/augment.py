"""Train-only augmentation whose randomness is a function of (seed, epoch, sample index).

A transform given to the training set only (``Recipe(train_transform=...)`` or
``Trainer(train_transform=...)``) is applied by :class:`Augmented`: every sample draws
its random numbers from its own generator, seeded from the run seed, the epoch and the
sample's index.  So each epoch draws new augmentations, the same run seed draws the
same ones, and a run resumed in the middle of an epoch draws exactly what the
uninterrupted run drew -- whichever loader worker (persistent or not) loads the sample.
Randomness drawn from the global generators inside ``__getitem__`` has none of these
properties under workers: each worker's stream starts from the worker's seed, and after
a mid-epoch resume the samples land on different workers at different points of it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils.data import Dataset

from overt.engine.data import EpochIndex, is_ready_loader

#: ``transform(sample, generator) -> sample``: draw every random number from ``generator``
Transform = Callable[[Any, torch.Generator], Any]


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A distinct, reproducible seed per (run seed, epoch, sample index)."""
    return (seed * 0x9E3779B1 + epoch * 0x85EBCA77 + index * 0xC2B2AE3D + 0x27D4EB2F) % (2**63 - 1)


class Augmented(Dataset):
    """``dataset`` with ``transform(sample, generator)`` applied to every sample it returns.

    The engine wraps the training set in it when given a ``train_transform`` and loads it
    with an epoch-tagged sampler: ``dataset[EpochIndex(epoch, i)]``.  A plain integer index
    uses :attr:`epoch` (set it with :meth:`set_epoch` when you load it yourself)."""

    def __init__(self, dataset: Any, transform: Transform, seed: int = 0):
        self.dataset, self.transform, self.seed = dataset, transform, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: Any) -> Any:
        epoch, index = key if isinstance(key, EpochIndex) else (self.epoch, key)
        generator = torch.Generator().manual_seed(sample_seed(self.seed, epoch, index))
        return self.transform(self.dataset[index], generator)


def augmented(train_data: Any, transform: Transform, seed: int) -> Augmented:
    """``train_data`` (a Dataset) wrapped in :class:`Augmented`; a ready loader cannot be."""
    if is_ready_loader(train_data):
        from overt.errors import ConfigError

        raise ConfigError(f"a train_transform was given with a ready {type(train_data).__name__} as training data",
                          why="the engine applies the transform per sample, inside its own loader, so that the "
                              "augmentation is re-drawn every epoch and resumes exactly",
                          fix="pass the training Dataset itself (the engine builds the loader), or apply the "
                              "transform in your own Dataset")
    return Augmented(train_data, transform, seed)
