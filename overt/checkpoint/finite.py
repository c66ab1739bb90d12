"""Is a state finite?  One reduction on the device and one host read, whatever the number of tensors.

A checkpoint is a promise that training can go on from it; weights or optimizer moments that
hold NaN/inf break it.  :func:`all_finite` is what a save checks (once per save, never per
step); :func:`nonfinite_names` names the culprits on the slow path, when something is wrong.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import torch


def float_tensors(tree: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """``(key path, tensor)`` for every floating-point tensor in a nested state (dicts, lists, tuples)."""
    if isinstance(tree, torch.Tensor):
        if type(tree).__name__ == "DTensor":  # FSDP2: this rank's shard (every rank checks its own)
            tree = tree.to_local()
        if tree.is_floating_point() or tree.is_complex():
            yield prefix, tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from float_tensors(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from float_tensors(value, f"{prefix}.{i}" if prefix else str(i))


def all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    """Whether every element of every tensor is finite: per-tensor flags reduced on their device,
    then one host read per device (one in total on a single-device run)."""
    flags: dict[torch.device, list[torch.Tensor]] = {}
    for t in tensors:
        if t.numel():
            flags.setdefault(t.device, []).append(torch.isfinite(t.detach()).all())
    return all(bool(torch.stack(group).all()) for group in flags.values())


def nonfinite_names(named: Iterable[tuple[str, torch.Tensor]]) -> list[str]:
    """The names of the tensors holding NaN/inf (the slow path: one read per tensor)."""
    return [name for name, t in named if t.numel() and not bool(torch.isfinite(t.detach()).all())]
