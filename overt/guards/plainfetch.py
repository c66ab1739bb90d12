"""A DataLoader fetch that runs only PyTorch's and overt's own code is made with the axes window's mode
aside (issue 33, the eighth overhead pass).

While the axes window is open (:mod:`overt.guards.axes`: the first checked steps, the first evaluation phase)
its :class:`~torch.overrides.TorchFunctionMode` sees every torch call of this thread.  Fetching a batch of a
``TensorDataset`` (or of a ``Subset`` of one) with the default collate and a sampler of torch's or of overt's
engine makes one torch call per sample and field (``tensor[index]``: 128 for a batch of 64 pairs) and a stack
per field, none of them the user's: the mode passes each one on untouched (a call made from torch's or
overt's files is never the user's line), a Python ``__torch_function__`` of about 8 calls apiece.  Such a
fetch runs with the mode stood aside, under the rule of the guards' own hooks (:func:`overt.guards.aside.step_aside`:
not while ``singleton-axis`` follows a pending index, when the mode looks at every call's arguments).  A fetch
that can run the user's code (their data set class, ``collate_fn``, sampler, a tensor subclass) stays under the
mode.  Which fetches qualify depends on the loader's objects alone, so the findings stay the same.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import BatchSampler, Subset, TensorDataset
from torch.utils.data._utils.collate import default_collate, default_convert

from overt.guards import aside

_COLLATES = (default_collate, default_convert)
_OWN_PACKAGES = ("torch", "overt")  # a sampler class of torch's or overt's engine: no line of it is the user's


def _own_class(obj: Any) -> bool:
    return (getattr(type(obj), "__module__", "") or "").split(".")[0] in _OWN_PACKAGES


def torch_only(it: Any) -> bool:
    """Whether fetching a batch from the single-process DataLoader iterator ``it`` runs no code of the user's:
    a ``TensorDataset`` of plain tensors (through ``Subset``\\ s), the default collate, samplers of torch or
    overt (exact classes: a subclass may be the user's)."""
    if getattr(it, "_num_workers", 1) or getattr(it, "_dataset_kind", None) != 0:  # 0: a map-style data set
        return False
    ds = getattr(it, "_dataset", None)
    for _ in range(4):
        if type(ds) is not Subset:
            break
        ds = ds.dataset
    if type(ds) is not TensorDataset or not all(type(t) is torch.Tensor for t in ds.tensors):
        return False
    if getattr(it, "_collate_fn", None) not in _COLLATES:
        return False
    sampler = getattr(it, "_index_sampler", None)
    if getattr(it, "_auto_collation", False):
        if type(sampler) is not BatchSampler:
            return False
        sampler = sampler.sampler
    return sampler is not None and _own_class(sampler)


def fetch(orig: Any, it: Any) -> Any:
    """``orig(it)`` (the iterator's own ``__next__``) while the axes window is open: with its mode aside when
    the fetch runs only torch's and overt's code (decided once per iterator)."""
    try:
        plain = it._overt_plain
    except AttributeError:
        try:
            plain = torch_only(it)
        except Exception:  # noqa: BLE001  never break the user's loop: the fetch stays under the mode
            plain = False
        try:
            it._overt_plain = plain
        except Exception:  # noqa: BLE001
            pass
    mode = aside.WINDOW
    if mode is not None and mode.held and not plain:  # held off since an optimizer step that raised: back now
        token = aside.step_aside(mode)
        if token is not None:
            aside.back(token)
    token = aside.step_aside(mode) if plain and mode is not None else None
    try:
        return orig(it)
    finally:
        if token is not None:
            aside.back(token)
