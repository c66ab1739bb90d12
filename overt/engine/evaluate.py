"""Validation: eval mode, no graph, sample-weighted metrics, training mode restored."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch import nn

from overt.engine.device import batch_size_of, move_to_device
from overt.engine.metrics import WeightedMean


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """``model.eval()`` for the block, then every submodule back to the mode it had
    (a frozen BatchNorm left in eval stays in eval)."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def evaluate(
    model: nn.Module,
    loader: Any,
    *,
    loss_fn: Callable[[Any, Any], torch.Tensor],
    forward: Callable[[nn.Module, Any], tuple[Any, Any]],
    metrics: dict[str, Callable[[Any, Any], torch.Tensor]],
    device: torch.device,
    autocast: Callable[[], Any],
    prefix: str = "val/",
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> dict[str, float]:
    """Run ``loader`` through ``model`` under ``eval()`` and ``inference_mode``; return
    ``{prefix+'loss': ..., prefix+name: ...}`` averaged over samples.  ``reduce`` (a sum over
    processes) makes them the means over every process's samples."""
    totals = WeightedMean()
    non_blocking = device.type == "cuda"
    with eval_mode(model), torch.inference_mode():
        for batch in loader:
            batch = move_to_device(batch, device, non_blocking)
            with autocast():
                output, target = forward(model, batch)
                values = {"loss": loss_fn(output, target)}
                for name, fn in metrics.items():
                    values[name] = fn(output, target)
            totals.add(values, batch_size_of(target) or batch_size_of(batch))
    return {prefix + name: value for name, value in totals.compute(reduce).items()}
