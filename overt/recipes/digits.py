"""Built-in recipe: an MLP with dropout on scikit-learn's 8x8 handwritten digits.

The data (1,797 images, 10 classes) ships inside scikit-learn, so this runs on
a fresh machine with no download.  A fixed ``split_seed`` holds out 20% for
validation.  The preprocessing is declared once (:data:`PREPROCESSING`: pixel values
0..16 scaled to 0..1) and used for training, ``overt predict`` and ``overt export``
alike, so predict takes rows straight from ``load_digits()``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt
from overt.engine.metrics import accuracy
from overt.preprocessing import Preprocessing

defaults = {
    "epochs": 20,
    "batch_size": 32,
    "monitor": "val/accuracy",
    "monitor_mode": "max",
    "lr": 3e-3,
    "weight_decay": 1e-4,
    "hidden": 128,
    "dropout": 0.1,
    "val_fraction": 0.2,
    "split_seed": 0,
}


#: raw input: the 64 pixel values (0..16) of an 8x8 image, as ``load_digits().data`` gives them
PREPROCESSING = Preprocessing(width=64, scale=16.0, task="classification", labels=[str(d) for d in range(10)])


def split_indices(n: int, val_fraction: float, split_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices of the ``n`` images: a seeded permutation, the first part held out."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(split_seed))
    n_val = int(round(n * val_fraction))
    return order[n_val:], order[:n_val]


def load_digits_split(val_fraction: float, split_seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Digits prepared by :data:`PREPROCESSING` (float32 in [0, 1]) and int64 labels, split with a fixed seed."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = PREPROCESSING.tensor(data.data)
    y = torch.tensor(data.target, dtype=torch.int64)
    train_idx, val_idx = split_indices(len(x), val_fraction, split_seed)
    return TensorDataset(x[train_idx], y[train_idx]), TensorDataset(x[val_idx], y[val_idx])


def raw_validation(val_fraction: float, split_seed: int) -> list:
    """The validation images' raw rows (0..16), in the validation split's order."""
    from sklearn.datasets import load_digits

    data = load_digits().data
    return list(data[split_indices(len(data), val_fraction, split_seed)[1].numpy()])


def build_model(cfg, meta=None) -> nn.Module:
    return DigitsMLP(cfg.hidden, cfg.dropout)


class DigitsMLP(nn.Module):
    """Two hidden layers with ReLU and dropout; returns logits."""

    def __init__(self, hidden: int, dropout: float, n_in: int = 64, n_classes: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_in, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build(cfg) -> overt.Recipe:
    train, val = load_digits_split(cfg.val_fraction, cfg.split_seed)
    model = build_model(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return overt.Recipe(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_data=train,
        val_data=val,
        scheduler=lambda opt, total_steps: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=cfg.lr, total_steps=total_steps
        ),
        scheduler_interval="step",
        metrics={"accuracy": accuracy},
        preprocessing=PREPROCESSING,
        raw_val=raw_validation(cfg.val_fraction, cfg.split_seed),
    )
