"""Which device to train on, and moving (nested) batches to it."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


def pick_device(spec: str = "auto") -> torch.device:
    """``auto`` picks cuda, then mps, then cpu; anything else is taken as given."""
    if spec != "auto":
        device = torch.device(spec)
        if device.type == "cuda" and not torch.cuda.is_available():
            from overt.errors import ConfigError

            raise ConfigError(f"device={spec} was asked for, but CUDA is not available here",
                              fix="use device=auto or device=cpu")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def move_to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Move every tensor in ``batch`` (tensors, lists, tuples, namedtuples,
    dicts, dataclasses, nested) to ``device``; other values are left alone."""
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else batch.to(device, non_blocking=non_blocking)
    if type(batch) is tuple or type(batch) is list:  # the common case first: a plain (inputs, target)
        return type(batch)(move_to_device(b, device, non_blocking) for b in batch)
    if isinstance(batch, (list, tuple)):
        moved = [move_to_device(b, device, non_blocking) for b in batch]
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
            return type(batch)(*moved)
        return type(batch)(moved) if isinstance(batch, tuple) else moved
    if isinstance(batch, dict):
        return type(batch)({k: move_to_device(v, device, non_blocking) for k, v in batch.items()})
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {f.name: move_to_device(getattr(batch, f.name), device, non_blocking)
                   for f in dataclasses.fields(batch) if f.init}
        return dataclasses.replace(batch, **changes)
    return batch


def batch_size_of(batch: Any) -> int:
    """Number of samples in a batch: the first dimension of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, (list, tuple)):
        for item in batch:
            n = batch_size_of(item)
            if n:
                return n
    if isinstance(batch, dict):
        for item in batch.values():
            n = batch_size_of(item)
            if n:
                return n
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return batch_size_of([getattr(batch, f.name) for f in dataclasses.fields(batch)])
    return 0
