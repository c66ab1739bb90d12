"""Tied parameters that a ``load_state_dict`` unties (slug ``load-state-dict-no-effect``).

Premise: a parameter that two module attributes share before a load (tied input and output
embeddings, a shared encoder) is still one set of values after it, unless the state dict itself gave
its names different values.  ``load_state_dict(..., assign=True)`` replaces each parameter object of
a key it finds and leaves the others alone: with a state dict that holds the shared weight under one
name only (safetensors and ``save_pretrained`` drop the duplicate; ``strict=False`` accepts the
missing key), the named attribute gets the loaded tensor and the other keeps the model's values from
before the load, its fresh initialisation.  The model then computes with two different weights where
it was built to use one, and predicts as if half of it had never been loaded.

:func:`groups` records the tied names before the call (host attributes only); :func:`broken` says,
after it, which groups are no longer one object with one member the state dict did not name; the
values are compared on the device by the caller (a group whose members still hold equal values, as
with a state dict that names every member with the same tensor, is not a broken tie).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

MAX_GROUPS = 16  # tied groups looked at per load


def groups(module: nn.Module) -> list[list[str]]:
    """The names of the parameters that several attributes of ``module`` share (one list per shared
    parameter, in the order ``named_parameters`` gives them)."""
    by_id: dict[int, list[str]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    return [names for names in by_id.values() if len(names) > 1][:MAX_GROUPS]


def broken(module: nn.Module, tied: list[list[str]], state: Any) -> list[tuple[list[str], list[str], Any]]:
    """After a load: per tied group whose members are no longer one parameter and some member was not
    named by ``state``, (the names the state dict named, the names it did not, a device flag: whether the
    two sides' values differ)."""
    if not tied or not hasattr(state, "keys"):
        return []
    now = dict(module.named_parameters(remove_duplicate=False))
    keys = set(state.keys())
    out = []
    for names in tied:
        params = [now.get(n) for n in names]
        if any(p is None for p in params) or all(p is params[0] for p in params):
            continue
        loaded = [n for n in names if n in keys]
        left = [n for n in names if n not in keys]
        if not loaded or not left:
            continue  # the state dict named every member (an untied checkpoint) or none (nothing loaded there)
        a, b = now[loaded[0]], now[left[0]]
        if a.shape != b.shape or a.device != b.device or a.device.type == "meta" or b.device.type == "meta":
            continue
        with torch.no_grad():
            differ = (a.detach() != b.detach()).any()
        out.append((loaded, left, differ))
    return out
