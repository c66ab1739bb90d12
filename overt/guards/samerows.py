"""Comparing a model's outputs for the same samples across two runs of its forward (slug
``batch-dependent-eval``: the half-batch probe of :mod:`overt.guards.independence` and the small-batch probe
of :mod:`overt.guards.smallbatch`).  Pure functions; no hooks, no session."""

from __future__ import annotations

from typing import Any

import torch

RTOL = 1e-3  # relative to the largest output magnitude (float32; half precision: 1e-2)


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a forward's arguments or output: a tensor, or the first 8 found in nested lists, tuples
    and dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value[:8] for t in tensors(v)][:8]
    if isinstance(value, dict):
        return [t for v in list(value.values())[:8] for t in tensors(v)][:8]
    return []


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` equals ``b`` within :data:`RTOL` of ``b``'s largest magnitude (non-finite positions left out)."""
    a, b = a.detach().float(), b.detach().float()
    if a.shape != b.shape:
        return False
    if not a.numel():
        return True
    scale = float(b.abs().amax()) if torch.isfinite(b).all() else 0.0
    rtol = RTOL if a.dtype == b.dtype == torch.float32 else 1e-2
    diff = (a - b).abs()
    diff = diff[torch.isfinite(diff)]
    return not diff.numel() or float(diff.amax()) <= rtol * scale + 1e-5
