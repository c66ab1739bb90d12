"""Built-in recipe ``mnist``: a small CNN on MNIST read from IDX files on disk.

overt never downloads MNIST: point ``data_dir=`` at a folder holding the IDX
files (gzip-compressed or not) as distributed by LeCun, Cortes and Burges::

    train-images-idx3-ubyte  train-labels-idx1-ubyte    (60,000 images, optional)
    t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte     (10,000 images)

With the training files present the model trains on them and validates on
t10k.  With only t10k, its first ``1 - val_fraction`` of the images train and
the rest validate (a message says so).  Pixels are scaled to [0, 1] and
normalised with the mean and standard deviation of the training split only;
both are saved with the run so that ``overt predict`` applies the same
normalisation to raw 0-255 pixels (``.npy`` arrays of shape (N, 28, 28) or (N, 784)).

    overt train mnist data_dir=path/to/mnist
"""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt
from overt.engine.metrics import accuracy
from overt.errors import DataError
from overt.preprocessing import Preprocessing
from overt.recipes.common import find_file

defaults = {
    "epochs": 3,
    "batch_size": 64,
    "monitor": "val/accuracy",
    "monitor_mode": "max",
    "data_dir": "data/mnist",
    "val_fraction": 0.2,
    "limit": 0,
    "lr": 2e-3,
    "weight_decay": 1e-4,
    "channels": 16,
    "hidden": 64,
    "dropout": 0.25,
}

GET_IT = "https://yann.lecun.com/exdb/mnist/ (or any mirror of the four IDX files)"


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (gzip or not) as a numpy array of its declared shape (unsigned bytes only)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataError(f"{path} is not an IDX file of unsigned bytes",
                        why="MNIST images and labels are IDX files whose header starts 00 00 08",
                        fix=f"replace it with the original file from {GET_IT}")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DataError(f"{path} is truncated: its header says {dims}, it holds {body.size} values",
                        fix=f"download it again from {GET_IT}")
    return body.reshape(dims)


def _pair(data_dir: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    what = f"MNIST {split} files"
    images = read_idx(find_file(data_dir, [f"{split}-images-idx3-ubyte", f"{split}-images.idx3-ubyte"],
                                what=what, get_it=GET_IT, setting="data_dir"))
    labels = read_idx(find_file(data_dir, [f"{split}-labels-idx1-ubyte", f"{split}-labels.idx1-ubyte"],
                                what=what, get_it=GET_IT, setting="data_dir"))
    if len(images) != len(labels):
        raise DataError(f"MNIST {split}: {len(images)} images but {len(labels)} labels in {data_dir}",
                        fix=f"use matching files from {GET_IT}")
    return images, labels


def load_mnist_split(data_dir: str | Path, val_fraction: float, limit: int = 0) -> tuple[
        tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((train images, labels), (val images, labels)) as uint8 arrays; ``limit`` caps the training images."""
    test = _pair(data_dir, "t10k")
    try:
        train = _pair(data_dir, "train")
        val = test
    except DataError:
        n_train = int(round(len(test[0]) * (1 - val_fraction)))
        print(f"mnist: no training files in {data_dir}: training on the first {n_train} t10k images, "
              f"validating on the last {len(test[0]) - n_train}", file=sys.stderr)
        train = (test[0][:n_train], test[1][:n_train])
        val = (test[0][n_train:], test[1][n_train:])
    if limit:
        train = (train[0][:limit], train[1][:limit])
        val = (val[0][:max(limit // 4, 1)], val[1][:max(limit // 4, 1)])
    return train, val


def preprocessing(mean: float, std: float, size: int = 28) -> Preprocessing:
    """Raw pixels 0..255 (an image, or a flat row of ``size * size``) -> scaled to [0, 1], standardised with
    the training split's ``mean``/``std``, shaped (1, size, size): the one definition training, predict
    and export share."""
    return Preprocessing(width=size * size, shift=255.0 * mean, scale=255.0 * std, shape=[1, size, size],
                         task="classification", labels=[str(d) for d in range(10)])


def normalised(images: np.ndarray, mean: float, std: float) -> torch.Tensor:
    """uint8 (N, H, W) -> float32 (N, 1, H, W) through :func:`preprocessing`."""
    return preprocessing(mean, std, int(images.shape[-1])).tensor(images)


class MnistCNN(nn.Module):
    """Two conv-ReLU-maxpool stages (the ``backbone``) and an MLP ``head``; returns logits."""

    def __init__(self, channels: int = 16, hidden: int = 64, dropout: float = 0.25, n_classes: int = 10):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(dropout),
            nn.Linear(2 * channels * 7 * 7, hidden), nn.ReLU(),
        )
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def build_model(cfg: Any, meta: dict[str, Any] | None = None) -> nn.Module:
    return MnistCNN(cfg.channels, cfg.hidden, cfg.dropout)


def build(cfg: Any) -> overt.Recipe:
    (x_tr, y_tr), (x_va, y_va) = load_mnist_split(cfg.data_dir, cfg.val_fraction, cfg.limit)
    scaled = x_tr.astype(np.float32) / 255.0
    mean, std = float(scaled.mean()), float(scaled.std())
    train = TensorDataset(normalised(x_tr, mean, std), torch.from_numpy(y_tr.astype(np.int64)))
    val = TensorDataset(normalised(x_va, mean, std), torch.from_numpy(y_va.astype(np.int64)))
    model = build_model(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return overt.Recipe(
        model=model, optimizer=optimizer, loss_fn=nn.CrossEntropyLoss(),
        train_data=train, val_data=val,
        scheduler=lambda opt, total_steps: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=cfg.lr, total_steps=total_steps),
        scheduler_interval="step",
        metrics={"accuracy": accuracy},
        meta={"mean": mean, "std": std, "size": int(x_tr.shape[1])},
        preprocessing=preprocessing(mean, std, int(x_tr.shape[1])),
        raw_val=x_va,
    )

