"""Split a nested state (state_dicts, RNG states) into JSON plus named tensors.

A ``state_dict`` mixes tensors with python structures (an optimizer's is
``{"state": {0: {"exp_avg": tensor, ...}}, "param_groups": [{"betas": (0.9, 0.999), ...}]}``).
:func:`encode` replaces every tensor by a reference ``{"__tensor__": key}`` and
returns the tensors separately (they go into a safetensors file); tuples,
dicts with non-string keys and numpy arrays get small tagged forms, so
:func:`decode` rebuilds exactly the same structure.  Nothing here can execute
code when read back: the formats are JSON and safetensors.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from overt.errors import OvertError

_TAGS = ("__tensor__", "__tuple__", "__items__", "__ndarray__", "__float__", "__dtype__")


class CheckpointError(OvertError):
    """A checkpoint that cannot be written, found or read."""


def encode(tree: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> Any:
    """JSON-able form of ``tree``; tensors are copied to host memory into ``tensors`` under key paths."""
    if isinstance(tree, torch.Tensor):
        key = prefix
        n = 1
        while key in tensors:  # pragma: no cover - paths are unique unless keys repeat after str()
            key, n = f"{prefix}#{n}", n + 1
        # a private host copy: later training steps cannot change what is written
        tensors[key] = tree.detach().to("cpu", copy=True).contiguous()
        return {"__tensor__": key}
    if tree is None or isinstance(tree, (bool, int, str)):
        return tree
    if isinstance(tree, float):
        return tree if math.isfinite(tree) else {"__float__": repr(tree)}
    if isinstance(tree, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in tree):
            return {k: encode(v, f"{prefix}.{k}", tensors) for k, v in tree.items()}
        return {"__items__": [[encode(k, f"{prefix}.key{i}", tensors), encode(v, f"{prefix}.{k}", tensors)]
                              for i, (k, v) in enumerate(tree.items())]}
    if isinstance(tree, tuple):
        return {"__tuple__": [encode(v, f"{prefix}.{i}", tensors) for i, v in enumerate(tree)]}
    if isinstance(tree, list):
        return [encode(v, f"{prefix}.{i}", tensors) for i, v in enumerate(tree)]
    if isinstance(tree, np.ndarray):
        return {"__ndarray__": tree.tolist(), "dtype": str(tree.dtype)}
    if isinstance(tree, np.generic):
        return encode(tree.item(), prefix, tensors)
    if isinstance(tree, torch.dtype):
        return {"__dtype__": str(tree).removeprefix("torch.")}
    raise CheckpointError(
        f"cannot store a {type(tree).__name__} at {prefix!r} in a checkpoint",
        why="overt checkpoints hold only tensors and plain data (numbers, strings, lists, dicts), "
            "so that loading one can never run code",
        fix=f"make the state_dict at {prefix!r} return plain values (e.g. a number or a string) instead",
    )


def decode(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(tree, list):
        return [decode(v, tensors) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "__tensor__" in tree:
        key = tree["__tensor__"]
        if key not in tensors:
            raise CheckpointError(f"the checkpoint's state refers to a tensor {key!r} that its tensor file lacks",
                                  why="the files of this checkpoint do not belong together",
                                  fix="use another checkpoint")
        return tensors[key]
    if "__tuple__" in tree:
        return tuple(decode(v, tensors) for v in tree["__tuple__"])
    if "__items__" in tree:
        return {decode(k, tensors): decode(v, tensors) for k, v in tree["__items__"]}
    if "__ndarray__" in tree:
        return np.asarray(tree["__ndarray__"], dtype=np.dtype(tree["dtype"]))
    if "__float__" in tree:
        return float(tree["__float__"])
    if "__dtype__" in tree:
        dtype = getattr(torch, tree["__dtype__"], None)
        if not isinstance(dtype, torch.dtype):
            raise CheckpointError(f"unknown torch dtype {tree['__dtype__']!r} in a checkpoint")
        return dtype
    return {k: decode(v, tensors) for k, v in tree.items()}
