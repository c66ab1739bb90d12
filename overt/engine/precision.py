"""Numeric precision as one plug-in: autocast, loss scaling, unscale, step.

- ``fp32``: plain.
- ``bf16``: autocast to bfloat16; no loss scaling (bf16 has fp32's exponent range).
- ``fp16``: autocast to float16 with a ``torch.amp.GradScaler``; gradients are
  unscaled before clipping, and steps the scaler skips (inf/NaN gradients) are
  counted on the device, without a host sync per step.
- ``auto``: bf16 where the accelerator supports it, fp32 on CPU.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager

import torch

from overt.errors import ConfigError

_NULL = contextlib.nullcontext()


def resolve_precision(mode: str, device: torch.device) -> str:
    if mode != "auto":
        return mode
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return "bf16"
    return "fp32"


class Precision:
    """Autocast and gradient scaling for one device.  ``mode`` is fp32, bf16, fp16 or auto."""

    def __init__(self, mode: str, device: torch.device):
        self.mode = resolve_precision(mode, device)
        self.device = device
        self.dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[self.mode]
        self.scaler: Any = None
        self._skipped: torch.Tensor | None = None
        if self.mode == "fp16":
            try:
                self.scaler = torch.amp.GradScaler(device.type)
            except (RuntimeError, ValueError, TypeError) as exc:
                raise ConfigError(f"precision=fp16 is not supported on {device.type} with torch {torch.__version__}: {exc}",
                                  fix="use precision=bf16 or fp32 on this device") from None
            self._skipped = torch.zeros((), dtype=torch.int64, device=device)

    def autocast(self) -> ContextManager[Any]:
        """The context the forward pass and loss run under."""
        if self.dtype is None:
            return _NULL
        return torch.autocast(self.device.type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        loss.backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Bring gradients back to their true scale (before clipping or inspecting them)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Optimizer step; with a scaler, skipped on inf/NaN gradients and counted."""
        if self.scaler is None:
            optimizer.step()
            return
        scale = getattr(self.scaler, "_scale", None)
        if isinstance(scale, torch.Tensor):
            before = scale.clone()
            self.scaler.step(optimizer)
            self.scaler.update()
            # the scale backs off only when the step was skipped: count it on the device, no sync
            self._skipped += (self.scaler._scale < before).to(torch.int64)
        else:  # a GradScaler without the tensor attribute: fall back to host reads
            before_f = self.scaler.get_scale()
            self.scaler.step(optimizer)
            self.scaler.update()
            if self.scaler.get_scale() < before_f:
                self._skipped += 1

    @property
    def skipped_steps(self) -> int:
        """Optimizer steps skipped by the GradScaler so far (reads the device once)."""
        return 0 if self._skipped is None else int(self._skipped.item())

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"mode": self.mode, "skipped_steps": self.skipped_steps}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        if self._skipped is not None:
            self._skipped.fill_(int(state.get("skipped_steps", 0)))
