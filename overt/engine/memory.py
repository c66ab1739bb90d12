"""Activation checkpointing: trade compute for memory on chosen submodules.

``activation_checkpointing=["blocks.0", "Block"]`` (submodule names or class
names) makes those submodules keep no intermediate activations during the
training forward pass; backward recomputes them.  Parameters, state_dict keys
and hooks are unchanged.  Evaluation (no grad) runs the plain forward.
"""

from __future__ import annotations

import functools
from typing import Any

from torch import nn
from torch.utils.checkpoint import checkpoint

from overt.errors import ConfigError


def apply_activation_checkpointing(model: nn.Module, targets: list[str]) -> list[str]:
    """Wrap the forward of every submodule named (or whose class is named) in ``targets``.
    Returns the qualified names wrapped; raises ConfigError for a target that matches nothing."""
    wrapped: list[str] = []
    for target in targets:
        matches = [(name, m) for name, m in model.named_modules()
                   if name == target or (type(m).__name__ == target and name)]
        if not matches:
            names = [n for n, _ in model.named_modules() if n][:12]
            raise ConfigError(f"activation_checkpointing target {target!r} matches no submodule",
                              fix=f"name a submodule (e.g. {', '.join(names)}) or a submodule class name")
        for name, module in matches:
            if not getattr(module, "_overt_checkpointed", False):
                _wrap(module)
                wrapped.append(name)
    return wrapped


def _wrap(module: nn.Module) -> None:
    plain = module.forward

    @functools.wraps(plain)
    def forward(*args: Any, **kwargs: Any) -> Any:
        import torch

        if module.training and torch.is_grad_enabled():
            return checkpoint(plain, *args, use_reentrant=False, **kwargs)
        return plain(*args, **kwargs)

    module.forward = forward  # instance attribute: __call__ (and so every hook) still runs
    module._overt_checkpointed = True
