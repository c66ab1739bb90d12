"""One seed for python, numpy, torch (CPU and every CUDA device) and data loading."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed every global random number generator a training run touches."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def seed_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: derive python and numpy seeds from the
    worker's torch seed (which the loader derives from its generator)."""
    worker_seed = torch.initial_seed() % 2**32
    random.seed(worker_seed)
    np.random.seed(worker_seed)


def epoch_seed(seed: int, epoch: int) -> int:
    """A distinct, reproducible seed per (run seed, epoch)."""
    return (seed * 1_000_003 + epoch * 7919 + 12345) % (2**63 - 1)
