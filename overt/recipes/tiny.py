"""Built-in recipe ``tiny``: a linear classifier on a handful of 4-feature examples, 2 classes.

The smallest complete training run: a seeded synthetic set of points in four
dimensions, labelled by which side of a fixed plane they fall on, and
``nn.Linear(4, 2)`` (or a small MLP with ``hidden>0``) trained with
cross-entropy.  It needs no data on disk, trains in well under a second and is
the recipe to copy when writing your own.

    overt train tiny
    overt predict runs/tiny-... rows.csv        # CSV rows of 4 numbers -> label and probability
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt
from overt.engine.metrics import accuracy
from overt.preprocessing import Preprocessing

defaults = {
    "epochs": 30,
    "batch_size": 8,
    "monitor": "val/accuracy",
    "monitor_mode": "max",
    "lr": 0.05,
    "hidden": 0,
    "n_train": 48,
    "n_val": 16,
    "noise": 0.1,
    "data_seed": 0,
}

#: the plane that labels the points: class 1 where x . PLANE > 0
PLANE = (1.0, -1.0, 0.5, 0.5)
FEATURES = ["f0", "f1", "f2", "f3"]
#: raw input: 4 numbers (or a CSV row with the columns f0..f3), given to the model as they are
PREPROCESSING = Preprocessing(width=4, features=FEATURES, task="classification", labels=["negative side", "positive side"])


def make_points(n: int, noise: float, seed: int) -> TensorDataset:
    """``n`` points from a standard normal, labelled by the side of :data:`PLANE`, a little label noise
    from ``noise`` (Gaussian jitter added before thresholding)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=gen)
    score = x @ torch.tensor(PLANE) + noise * torch.randn(n, generator=gen)
    return TensorDataset(x, (score > 0).long())


def build_model(cfg: Any, meta: dict[str, Any] | None = None) -> nn.Module:
    if cfg.hidden > 0:
        return nn.Sequential(nn.Linear(4, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 2))
    return nn.Linear(4, 2)


def build(cfg: Any) -> overt.Recipe:
    train = make_points(cfg.n_train, cfg.noise, cfg.data_seed)
    val = make_points(cfg.n_val, cfg.noise, cfg.data_seed + 1)
    model = build_model(cfg)
    return overt.Recipe(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=cfg.lr),
        loss_fn=nn.CrossEntropyLoss(),
        train_data=train,
        val_data=val,
        metrics={"accuracy": accuracy},
        meta={"features": FEATURES, "labels": PREPROCESSING.labels},
        preprocessing=PREPROCESSING,
        raw_val=val.tensors[0].numpy(),
    )
