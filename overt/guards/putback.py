"""Buffers a probe's extra forwards may move, saved before and put back after.

Every buffer is put back, whatever its version counter says: ``batch_norm`` updates ``running_mean`` and
``running_var`` in place without bumping their versions.  The copy goes through ``.data`` so the user's buffers
keep the version counters they had (autograd sees no write)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def save_buffers(modules: Iterable[nn.Module]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each distinct buffer of ``modules`` (and their children) with a copy of its values."""
    seen: set[int] = set()
    saved = []
    for m in modules:
        for b in m.buffers():
            if id(b) not in seen:
                seen.add(id(b))
                saved.append((b, b.detach().clone()))
    return saved


def restore_buffers(saved: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Write the saved values back into their buffers."""
    with torch.no_grad():
        for b, copy in saved:
            b.data.copy_(copy)
