"""Built-in recipe ``resnet``: a small residual CNN on scikit-learn digits (default) or MNIST.

The network is built from two blocks: ``ConvBlock`` (3x3 convolution, batch
norm, ReLU) and ``ResidualBlock`` (two ConvBlocks whose output is added to
their input).  A stem ConvBlock widens the single input channel, ``blocks``
ResidualBlocks follow, then global average pooling and a linear ``head``; the
pooling makes the network independent of the image size, so the same weights
run on 8x8 digits and 28x28 MNIST (which :mod:`overt.recipes.finetune` uses).

Batch norm: the engine trains in ``train()`` mode and validates in ``eval()``
mode, so validation and prediction use the running statistics, never the
batch's own -- a prediction does not depend on what else is in its batch.

    overt train resnet                                   # digits, ships with scikit-learn
    overt train resnet data=mnist data_dir=path/to/mnist # MNIST IDX files, see the mnist recipe
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt
from overt.engine.metrics import accuracy
from overt.errors import ConfigError
from overt.preprocessing import Preprocessing

defaults = {
    "epochs": 10,
    "batch_size": 32,
    "monitor": "val/accuracy",
    "monitor_mode": "max",
    "data": "digits",
    "data_dir": "data/mnist",
    "val_fraction": 0.2,
    "split_seed": 0,
    "limit": 0,
    "lr": 3e-3,
    "weight_decay": 1e-4,
    "width": 32,
    "blocks": 2,
}


class ConvBlock(nn.Module):
    """3x3 convolution (no bias: batch norm follows), batch norm, ReLU."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(c_out)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.norm(self.conv(x)))


class ResidualBlock(nn.Module):
    """``x + f(x)`` with ``f`` two ConvBlocks of the same width."""

    def __init__(self, channels: int):
        super().__init__()
        self.first = ConvBlock(channels, channels)
        self.second = ConvBlock(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.second(self.first(x))


class SmallResNet(nn.Module):
    """stem -> residual blocks -> global average pool (the ``backbone``) -> linear ``head``."""

    def __init__(self, width: int = 32, blocks: int = 2, n_classes: int = 10, in_channels: int = 1):
        super().__init__()
        self.backbone = nn.Sequential(
            ConvBlock(in_channels, width),
            *[ResidualBlock(width) for _ in range(blocks)],
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def image_data(cfg: Any) -> tuple[TensorDataset, TensorDataset, dict[str, Any], Preprocessing, Any]:
    """(train, val, meta, preprocessing, raw validation images) for ``cfg.data``: raw images (digits 0..16,
    MNIST 0..255) prepared by one :class:`~overt.Preprocessing`: scaled to [0, 1], standardised with the
    training split's mean and standard deviation (in ``meta``, with the image size), shaped (1, H, W)."""
    if cfg.data == "digits":
        from sklearn.datasets import load_digits

        from overt.recipes.digits import split_indices

        data = load_digits()
        tr, va = split_indices(len(data.data), cfg.val_fraction, cfg.split_seed)
        a_tr, a_va = data.data[tr.numpy()], data.data[va.numpy()]
        b_tr, b_va = data.target[tr.numpy()], data.target[va.numpy()]
        if cfg.limit:
            a_tr, b_tr, a_va, b_va = a_tr[:cfg.limit], b_tr[:cfg.limit], a_va[:cfg.limit], b_va[:cfg.limit]
        scale, size = 16.0, 8
    elif cfg.data == "mnist":
        from overt.recipes.mnist import load_mnist_split

        (a_tr, b_tr), (a_va, b_va) = load_mnist_split(cfg.data_dir, cfg.val_fraction, cfg.limit)
        scale, size = 255.0, int(a_tr.shape[-1])
    else:
        raise ConfigError(f"data={cfg.data!r} is not a data set this recipe knows", fix="use data=digits or data=mnist")
    scaled = torch.tensor(a_tr.reshape(len(a_tr), -1), dtype=torch.float32) / scale
    mean, std = float(scaled.mean()), float(scaled.std())
    prep = Preprocessing(width=size * size, shift=scale * mean, scale=scale * std, shape=[1, size, size],
                         task="classification", labels=[str(d) for d in range(10)])
    meta = {"data": cfg.data, "mean": mean, "std": std, "size": size, "pixel_max": scale}
    labels = lambda b: torch.tensor(b, dtype=torch.int64)  # noqa: E731
    return (TensorDataset(prep.tensor(a_tr), labels(b_tr)), TensorDataset(prep.tensor(a_va), labels(b_va)), meta,
            prep, a_va)


def build_model(cfg: Any, meta: dict[str, Any] | None = None) -> nn.Module:
    return SmallResNet(cfg.width, cfg.blocks)


def build(cfg: Any) -> overt.Recipe:
    train, val, meta, prep, raw_val = image_data(cfg)
    model = build_model(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return overt.Recipe(
        model=model, optimizer=optimizer, loss_fn=nn.CrossEntropyLoss(),
        train_data=train, val_data=val,
        scheduler=lambda opt, total_steps: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=cfg.lr, total_steps=total_steps),
        scheduler_interval="step",
        metrics={"accuracy": accuracy},
        meta=meta,
        preprocessing=prep,
        raw_val=raw_val,
    )

