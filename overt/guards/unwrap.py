"""The real module and optimizer behind a framework's wrappers.

Frameworks hand their users wrappers: Accelerate's ``AcceleratedOptimizer`` (and so the
Hugging Face ``Trainer``'s optimizer), Lightning's ``LightningOptimizer``, DeepSpeed-style
engines, ``DistributedDataParallel`` / ``DataParallel`` / FSDP1's ``FullyShardedDataParallel``
around a module, ``torch.compile``'s ``OptimizedModule``.  Some subclass
``torch.optim.Optimizer`` without calling its ``__init__``, so PyTorch's step hooks cannot be
registered on them (``'AcceleratedOptimizer' object has no attribute
'_optimizer_step_pre_hooks'``).  The guards watch the object underneath: the wrapper's
``step()`` calls the real optimizer's, whose hooks then fire, and the wrapped module's
``forward`` calls the real module's.

Pure attribute reads: nothing here imports a framework.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

# attributes under which wrappers keep what they wrap, in the order they are tried
_OPTIMIZER_ATTRS = ("optimizer", "_optimizer")
_MODULE_ATTRS = ("module", "_orig_mod", "_fsdp_wrapped_module")
_MAX_DEPTH = 8  # wrappers of wrappers (an AcceleratedOptimizer inside a LightningOptimizer ...)


def _has_own_hooks(opt: Any) -> bool:
    """Whether ``opt`` is a real optimizer: its ``__init__`` ran, so it holds PyTorch's hook dicts."""
    return isinstance(opt, torch.optim.Optimizer) and "_optimizer_step_pre_hooks" in vars(opt)


def unwrap_optimizer(opt: Any) -> Any:
    """The optimizer that really steps behind ``opt`` (``opt`` itself when it is not a wrapper).

    Follows ``.optimizer`` / ``._optimizer`` while the object is not a fully initialised
    ``torch.optim.Optimizer``.  Returns the last object reached (which may still be no
    optimizer: the caller decides what to do with it)."""
    seen = 0
    while seen < _MAX_DEPTH and not _has_own_hooks(opt):
        inner = next((getattr(opt, a) for a in _OPTIMIZER_ATTRS
                      if getattr(opt, a, None) is not None and getattr(opt, a) is not opt), None)
        if inner is None:
            break
        opt = inner
        seen += 1
    return opt


def unwrap_model(model: Any) -> Any:
    """The user's module behind ``model``: through ``DistributedDataParallel`` / ``DataParallel``
    (``.module``), FSDP1 (``.module``), ``torch.compile`` (``._orig_mod``) and Accelerate's or
    DeepSpeed's engines (``.module``).  FSDP2 (``fully_shard``) changes the module in place: it
    is returned as it is."""
    seen = 0
    while seen < _MAX_DEPTH:
        inner = next((getattr(model, a) for a in _MODULE_ATTRS
                      if isinstance(getattr(model, a, None), nn.Module) and getattr(model, a) is not model), None)
        # a user module may well have a submodule called ``module``: only unwrap known wrappers
        if inner is None or not _is_wrapper(model):
            break
        model = inner
        seen += 1
    return model


def _is_wrapper(model: Any) -> bool:
    """Whether ``model`` is a wrapper whose only job is to run the module it holds."""
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        return True
    cls = type(model)
    names = {c.__name__ for c in cls.__mro__}
    return bool(names & {"FullyShardedDataParallel", "OptimizedModule", "DeepSpeedEngine", "PipelineEngine"})


def is_sharded(param: Any) -> bool:
    """Whether ``param`` holds only this rank's shard of a parameter: an FSDP2 ``DTensor``, or a
    parameter FSDP1 manages (its ``FlatParameter``, and with ``use_orig_params=True`` the original
    parameters, views into this rank's shard, some of them empty).  Their values differ across
    ranks by design, and an empty shard gets no gradient."""
    return type(param).__name__ in ("DTensor", "FlatParameter") or bool(getattr(param, "_fsdp_flattened", False))


__all__ = ["is_sharded", "unwrap_model", "unwrap_optimizer"]
