"""Gradient norms: clipping, the total norm logged as ``train/grad_norm`` and, when asked,
each layer's norm (``grad_norm/<layer>``), with no host-device synchronisation per step.

With clipping on, the total (pre-clip) norm is computed every step, as clipping needs it.
Without clipping, the total norm -- and with ``log_grad_norms`` every layer's norm -- is
computed only on the steps that are logged; all of them stay on the device until the log
point, where they are read in one transfer with the other logged values.
With sharded (FSDP2) gradients only the total norm is logged (torch reduces it over the shards).
A layer is the module that owns the parameters (``encoder.0`` for ``encoder.0.weight`` and
``encoder.0.bias``): its norm is that of all its parameters' gradients together.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn


def _norms(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of each gradient, as one float32 vector (one fused kernel per device and dtype)."""
    return torch.stack([n.float() for n in torch._foreach_norm(grads)])


class GradNorms:
    """The loop's gradient norms for ``params`` (``model`` names the layers)."""

    def __init__(self, model: nn.Module, params: list[torch.Tensor], *, clip: float | None, per_layer: bool):
        self.params, self.clip = params, clip
        self.layers: list[str] = []
        self._layer_of: list[int] = []  # per parameter: its layer's position in self.layers, or -1
        if per_layer:
            names = {id(p): name for name, p in model.named_parameters()}
            for p in params:
                name = names.get(id(p))
                layer = name.rpartition(".")[0] or name if name is not None else None
                if layer is not None and layer not in self.layers:
                    self.layers.append(layer)
                self._layer_of.append(self.layers.index(layer) if layer is not None else -1)
        self.total: torch.Tensor | None = None  # the latest measured total norm (device tensor)
        self._layer_norms: torch.Tensor | None = None

    def measure(self, logged: bool) -> torch.Tensor | None:
        """At the end of a window, before the optimizer step (gradients unscaled): clip when
        clipping is on, and measure what the step logs.  Returns the total norm when it was
        computed (every step with clipping, logged steps without), else ``None``."""
        if self.clip is not None:
            self.total = nn.utils.clip_grad_norm_(self.params, self.clip)
        elif logged:
            self.total = None
        else:
            self.total = self._layer_norms = None
            return None
        if logged:
            self._measure_logged()
        return self.total

    @torch.no_grad()
    def _measure_logged(self) -> None:
        present = [(i, p.grad) for i, p in enumerate(self.params) if p.grad is not None]
        self._layer_norms = None
        if not present:
            return
        if any(hasattr(g, "full_tensor") for _, g in present):  # sharded (FSDP2 DTensor) gradients
            if self.total is None:  # torch's own total norm reduces over the shards; no per-layer norms
                self.total = nn.utils.clip_grad_norm_([p for p in self.params if p.grad is not None], math.inf)
            return
        norms = _norms([g for _, g in present])
        if self.total is None:
            self.total = norms.square().sum().sqrt()
        if self.layers:
            index = torch.tensor([self._layer_of[i] for i, _ in present], device=norms.device)
            keep = index >= 0
            sums = torch.zeros(len(self.layers), device=norms.device).index_add_(0, index[keep], norms[keep].square())
            self._layer_norms = sums.sqrt()

    def read(self) -> dict[str, float]:
        """The logged values as python floats (one host read): ``train/grad_norm`` and the layers'."""
        if self.total is None:
            return {}
        total = self.total.full_tensor() if hasattr(self.total, "full_tensor") else self.total
        values = torch.cat([total.reshape(1).float(),
                            *([] if self._layer_norms is None else [self._layer_norms])]).tolist()
        logs = {"train/grad_norm": values[0]}
        logs.update({f"grad_norm/{layer}": v for layer, v in zip(self.layers, values[1:])})
        return logs

    def describe(self) -> dict[str, Any]:
        return {"clip": self.clip, "layers": list(self.layers)}
