"""One seed for python, numpy, torch (CPU and every CUDA device) and data loading; the state of
every generator a training process draws from, captured and restored (saved in checkpoints)."""

from __future__ import annotations

import random
import warnings
from typing import Any

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


def capture_rng() -> dict[str, Any]:
    """The current state of every global generator (tensors and plain data)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch_cpu": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = [torch.cuda.get_rng_state(i) for i in range(torch.cuda.device_count())]
    return state


def restore_rng(state: dict[str, Any]) -> list[str]:
    """Put every generator back; returns notes on states that could not be applied here."""
    notes: list[str] = []
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        np.random.set_state(tuple(state["numpy"]))
    if "torch_cpu" in state:
        torch.set_rng_state(state["torch_cpu"].to(torch.uint8))
    cuda = state.get("torch_cuda") or []
    if cuda:
        if not torch.cuda.is_available():
            notes.append(f"the checkpoint holds RNG states of {len(cuda)} CUDA device(s); "
                         "this machine has none, so they were not restored")
        else:
            n = torch.cuda.device_count()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for i, s in enumerate(cuda[:n]):
                    torch.cuda.set_rng_state(s.to(torch.uint8), i)
            if len(cuda) != n:
                notes.append(f"the checkpoint holds RNG states of {len(cuda)} CUDA device(s), "
                             f"this machine has {n}; restored the first {min(n, len(cuda))}")
    return notes
