"""What the guard session knows about the models and optimizers it watches."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from overt.guards import compiled
from overt.guards.clock import StepClock

_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
_BN = (nn.modules.batchnorm._BatchNorm,)
_EMBED = (nn.Embedding, nn.EmbeddingBag)


class ModelInfo:
    """One watched root module: its layers of interest, found in one walk of the module
    tree, and the session's forward hooks on it."""

    def __init__(self, module: nn.Module, name: str):
        self.module = module
        self.name = name
        named = list(module.named_modules())  # one walk of the module tree
        mods = [m for _, m in named]
        self.dropbn = [m for m in mods
                       if (isinstance(m, _DROPOUT) and getattr(m, "p", 0) > 0) or isinstance(m, _BN)]
        self.bns = [m for m in self.dropbn if isinstance(m, _BN) and m.track_running_stats is not None]
        self.relus = [m for m in mods if isinstance(m, nn.ReLU)]
        self.sub_names = {id(m): (f"{name}.{n}" if n else name) for n, m in reversed(named)}
        self.has_embedding = any(isinstance(m, _EMBED) for m in mods)
        p = next((p for p in module.parameters() if p.is_floating_point()), None)
        self.param_dtype = p.dtype if p is not None else None
        self.param_device = p.device if p is not None else None
        self.forwards = 0  # forwards seen by the pre-hook
        # the keyword arguments of the forward whose pre-hook is running (empty otherwise, and when called
        # positionally); the hooks' ``args`` already hold them as the positional call would pass them
        self.kwargs: dict[str, Any] = {}
        self.post_handle: Any = None
        self._pre_handle: Any = None
        self.fwd_left = 0  # forwards still to look at outside checked steps
        self.compiled = False  # a compiled module around it (or compiled in place) was run eagerly for the guards
        # (Module.compile calls counted, the modules compiled in place) at the last walk (overt.guards.compiled)
        self.inplace_walk: tuple[int, list[nn.Module]] | None = None

    @property
    def pre_handle(self) -> Any:
        """The handle of the session's forward pre-hook on the model while its forwards are looked
        at (None otherwise).  Setting it tells :mod:`overt.guards.compiled`: a compiled module
        around the model runs it eagerly while the hook is there, so that the hooks fire."""
        return self._pre_handle

    @pre_handle.setter
    def pre_handle(self, handle: Any) -> None:
        was = self._pre_handle is not None
        self._pre_handle = handle
        if was != (handle is not None):
            compiled.looking(self, handle is not None)

    def label(self, m: nn.Module) -> str:
        return self.sub_names.get(id(m), type(m).__name__)


class OptInfo(StepClock):
    """One watched optimizer: its parameters and its place on the sampling clock."""

    __slots__ = ("opt", "params", "name", "pre_handle", "closure_pending")

    def __init__(self, opt: torch.optim.Optimizer, name: str, next_check: int = 0):
        super().__init__(next_check)
        self.opt = opt
        self.name = name
        self.params: list[torch.Tensor] = [p for g in opt.param_groups for p in g["params"]]
        self.pre_handle: Any = None  # the step pre-hook, installed only before checked steps
        self.closure_pending = False  # a checked step's closure has not been called yet (its checks wait)


def output_tensors(output: Any) -> list[torch.Tensor]:
    """The tensors of a forward's output (a tensor, or the first 8 of a list, tuple or dict)."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for t in output[:8] if isinstance(t, torch.Tensor)]
    if isinstance(output, dict):
        return [t for t in list(output.values())[:8] if isinstance(t, torch.Tensor)]
    return []


def storage_ptr(t: torch.Tensor) -> int | None:
    """The address of ``t``'s memory (shared by its views and ``detach()``), or None (no storage)."""
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001  a tensor without storage (a functional or meta tensor)
        return None
