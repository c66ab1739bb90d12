"""Small helpers every probe uses: copies of the user's objects, batches, forward passes."""

from __future__ import annotations

import copy
import time
from typing import Any, Callable

import torch
from torch import nn

from overt.engine.device import batch_size_of, move_to_device

Forward = Callable[[nn.Module, Any], "tuple[Any, Any]"]


def default_forward(model: nn.Module, batch: Any) -> tuple[Any, Any]:
    """``(inputs, target) -> (model(inputs), target)``: the engine's default forward."""
    from overt.engine.loop import default_forward as engine_forward

    return engine_forward(model, batch)


def fresh(model: nn.Module, optimizer: Any = None, scheduler: Any = None) -> tuple[Any, Any, Any]:
    """Independent copies of the model, its optimizer and scheduler, still wired to each other
    (the optimizer holds the copied model's parameters).  Probes train these, never the originals."""
    return copy.deepcopy((model, optimizer, scheduler))


def device_of(model: nn.Module, device: Any = None) -> torch.device:
    """``device`` if given, else where the model's first parameter (or buffer) lives, else the CPU."""
    if device is not None:
        return torch.device(device)
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def loader_for(data: Any, batch_size: int, *, shuffle: bool, seed: int = 0, collate_fn: Any = None,
               num_workers: int = 0, pin_memory: bool = False) -> Any:
    """The engine's seeded loader over a Dataset; a ready DataLoader (or any iterable of batches) as given."""
    from overt.engine.data import build_loader, is_ready_loader

    if is_ready_loader(data):
        return data
    return build_loader(data, batch_size=batch_size, shuffle=shuffle, seed=seed, collate_fn=collate_fn,
                        num_workers=num_workers, pin_memory=pin_memory)


def take(loader: Any, n: int) -> list[Any]:
    """The first ``n`` batches of ``loader`` (fewer when it is shorter)."""
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) >= n:
            break
    return out


def cut(batch: Any, n: int) -> Any:
    """The first ``n`` samples of a (nested) batch."""
    if isinstance(batch, torch.Tensor):
        return batch[:n] if batch.dim() else batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(cut(b, n) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(cut(b, n) for b in batch)
    if isinstance(batch, dict):
        return type(batch)({k: cut(v, n) for k, v in batch.items()})
    return batch


def to(batch: Any, device: torch.device) -> Any:
    return move_to_device(batch, device)


def samples(batch: Any) -> int:
    return batch_size_of(batch)


def param_layer(name: str) -> str:
    """``net.0.weight`` -> ``net.0``: the module a parameter belongs to."""
    return name.rsplit(".", 1)[0] if "." in name else "(model)"


def describe_module(model: nn.Module) -> str:
    """``DigitsMLP (3 Linear, 2 Dropout, 2 ReLU; 26,122 parameters)``."""
    kinds: dict[str, int] = {}
    for m in model.modules():
        if m is not model and not list(m.children()):
            kinds[type(m).__name__] = kinds.get(type(m).__name__, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    n = sum(p.numel() for p in model.parameters())
    return f"{type(model).__name__} ({parts + '; ' if parts else ''}{n:,} parameters)"


def describe_optimizer(optimizer: Any) -> str:
    groups = getattr(optimizer, "param_groups", [])
    if not groups:
        return type(optimizer).__name__
    g = groups[0]
    keys = [k for k in ("lr", "momentum", "weight_decay", "betas") if k in g]
    settings = ", ".join(f"{k}={g[k]}" for k in keys)
    return f"{type(optimizer).__name__}({settings}; {len(groups)} param group{'s' * (len(groups) != 1)})"


def describe_loss(loss_fn: Any) -> str:
    if isinstance(loss_fn, nn.Module):
        extra = loss_fn.extra_repr()
        return f"{type(loss_fn).__name__}({extra})"
    return getattr(loss_fn, "__qualname__", None) or type(loss_fn).__name__


def grad_norms(model: nn.Module) -> dict[str, float | None]:
    """Per-parameter gradient norm (None where ``.grad`` is None), one host read."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    with_grad = [(n, p.grad) for n, p in named if p.grad is not None]
    values = (torch.stack([g.detach().float().norm() for _, g in with_grad]).tolist() if with_grad else [])
    found = dict(zip((n for n, _ in with_grad), values))
    return {n: found.get(n) for n, _ in named}


class Clock:
    """Wall time with the device synchronised around it (timings of queued kernels lie)."""

    def __init__(self, device: torch.device):
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def now(self) -> float:
        self.sync()
        return time.perf_counter()
