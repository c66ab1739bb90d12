"""scikit-learn's digits, split once: the shared data of the framework projects."""

from __future__ import annotations

from functools import lru_cache

import torch


@lru_cache(maxsize=1)
def _split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    return x[:1400], y[:1400], x[1400:], y[1400:]


def digits(n_train: int = 512, n_val: int = 256) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train, y_train, x_val, y_val): inputs (n, 64) in [0, 1], labels 0..9."""
    xt, yt, xv, yv = _split()
    return xt[:n_train].clone(), yt[:n_train].clone(), xv[:n_val].clone(), yv[:n_val].clone()
