"""What a probe's extra calls of the user's code may move, saved before and put back after: buffers, and the
host's random generators (Python's and NumPy's; torch's own states are saved by each probe beside its devices).

Every buffer is put back, whatever its version counter says: ``batch_norm`` updates ``running_mean`` and
``running_var`` in place without bumping their versions.  The copy goes through ``.data`` so the user's buffers
keep the version counters they had (autograd sees no write)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable
from typing import Any

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


def save_host_random() -> tuple[Any, Any]:
    """Python's and NumPy's global random states (NumPy's only when it is imported: None otherwise); user code
    run again by a probe may draw from either."""
    np = sys.modules.get("numpy")
    return random.getstate(), (np.random.get_state() if np is not None else None)


def restore_host_random(state: tuple[Any, Any]) -> None:
    """Put back what :func:`save_host_random` saved."""
    random.setstate(state[0])
    if state[1] is not None:
        sys.modules["numpy"].random.set_state(state[1])
