"""Small real setups on scikit-learn digits for the doctor's tests: a clean one, and twins
with one planted bug each."""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from overt.recipes.digits import load_digits_split

FAST = {"overfit_steps": 150, "overfit_time_s": 600.0,  # steps decide, not how busy the machine is
        "resume_steps": 2, "determinism_steps": 3,
        "parity_steps": 3, "throughput_steps": 10, "throughput_time_s": 1.0, "batch_size": 32}


def digits(n_train: int = 512, n_val: int = 128) -> tuple[TensorDataset, TensorDataset]:
    train, val = load_digits_split(0.2, 0)
    return (TensorDataset(*(t[:n_train] for t in train.tensors)), TensorDataset(*(t[:n_val] for t in val.tensors)))


def mlp(hidden: int = 32, dropout: float = 0.1) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10))


def setup(model: nn.Module | None = None, lr: float = 3e-3):
    model = model or mlp()
    return model, torch.optim.Adam(model.parameters(), lr=lr), nn.CrossEntropyLoss()


def first_batch(data: TensorDataset, n: int = 32):
    x, y = data.tensors
    return x[:n], y[:n]


def fingerprint(model: nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """A hash of the model's weights, buffers and modes and of the optimizer's state."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    h.update(str([m.training for m in model.modules()]).encode())
    for p in model.parameters():
        h.update(b"none" if p.grad is None else p.grad.detach().cpu().numpy().tobytes())
    state = optimizer.state_dict()
    for pid, s in sorted(state["state"].items()):
        for k, v in sorted(s.items()):
            h.update(f"{pid}.{k}".encode())
            h.update(v.detach().cpu().contiguous().numpy().tobytes() if isinstance(v, torch.Tensor)
                     else repr(v).encode())
    h.update(repr(state["param_groups"]).encode())
    return h.hexdigest()


class SoftmaxMLP(nn.Module):
    """Planted: softmax at the end of forward, fed to CrossEntropyLoss."""

    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        return self.net(x).softmax(dim=1)


class PlainListMLP(nn.Module):
    """Planted: a layer kept in a plain Python list."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(64, 32)
        self.heads = [nn.Linear(32, 10)]

    def forward(self, x):
        return self.heads[0](F.relu(self.first(x)))


class UnusedLayer(nn.Module):
    """Planted: a layer defined but never used in forward."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(64, 10)
        self.extra = nn.Linear(10, 10)

    def forward(self, x):
        return self.body(x)


class Detached(nn.Module):
    """Planted: the output is detached from the graph."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(64, 10)

    def forward(self, x):
        return self.body(x).detach()


class NanGrad(nn.Module):
    """Planted: log of a value that is negative for some samples: NaN outputs, NaN gradients."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(64, 10)

    def forward(self, x):
        return torch.log(self.body(x))


class FunctionalDropout(nn.Module):
    """Planted: F.dropout without training=self.training (active in eval mode)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        return self.b(F.dropout(F.relu(self.a(x)), 0.3))


class NoisyDataset(torch.utils.data.Dataset):
    """Planted: augmentation noise from a generator overt cannot seed."""

    def __init__(self, base: TensorDataset):
        self.base = base
        import numpy as np

        self.rng = np.random.default_rng()

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        return x + torch.tensor(self.rng.normal(0, 0.1, size=x.shape), dtype=torch.float32), y


class SlowDataset(torch.utils.data.Dataset):
    """Planted: heavy per-sample work in __getitem__."""

    def __init__(self, base: TensorDataset, delay_s: float = 0.0005):
        self.base, self.delay_s = base, delay_s

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        import time

        end = time.perf_counter() + self.delay_s
        while time.perf_counter() < end:
            pass
        return self.base[i]


class UnbufferedState(nn.Module):
    """Planted: a random tensor kept as a plain attribute, not a buffer: not in the checkpoint."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(64, 10)
        self.offset = torch.randn(10)

    def forward(self, x):
        return self.body(x) + self.offset


class OffsetInputs(nn.Module):
    """Planted precision assumption: features shifted to ~100 before the first layer; bfloat16
    (8 significant bits) rounds them to steps of 0.5 and loses the pixel values."""

    def __init__(self):
        super().__init__()
        self.body = mlp()

    def forward(self, x):
        return self.body(x + 100.0)
