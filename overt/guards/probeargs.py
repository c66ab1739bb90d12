"""Fresh copies of a user's arguments for a probe that runs the user's code again (issue 33).

A probe that runs a module's forward, or a function of the user's, a second time must not touch the tensors the
user's own run holds: a forward that writes into its input (``nn.ReLU(inplace=True)`` opening a residual branch,
``x += ...`` on an argument) would write into the user's batch a second time, and under autograd bump the
version of a tensor the user's graph saved, so the user's ``backward()`` raises "modified by an inplace
operation" in a program that runs without overt (w420, the wild corpus).  ``tensor.detach()`` shares storage
and version counter with the tensor: it is no copy.  :func:`fresh` gives every tensor of an argument structure
as a detached clone (on checked steps only: one copy of the probed arguments).
"""

from __future__ import annotations

from typing import Any

import torch


def fresh(value: Any) -> Any:
    """``value`` with every tensor (in tuples, lists and dicts, at any depth) detached and cloned."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(fresh(v) for v in value)
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    return value
