"""A one-screen description of a model: parameters (trainable and frozen), size, device, dtype,
and its layers (the modules holding parameters).  Printed when ``overt train`` starts and kept in ``summary.json``."""

from __future__ import annotations

from typing import Any

from torch import nn

_MAX_ROWS = 12


def _count(module: nn.Module) -> tuple[int, int]:
    trainable = frozen = 0
    for p in module.parameters():
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return trainable, frozen


def model_summary(model: nn.Module) -> dict[str, Any]:
    """``parameters``, ``trainable``, ``frozen`` (counts), ``size_mb`` (parameters and buffers),
    ``devices``, ``dtypes`` and ``layers``: each module that holds parameters itself (a layer),
    with its qualified name, class and parameter counts."""
    trainable, frozen = _count(model)
    tensors = [*model.parameters(), *model.buffers()]
    size = sum(t.numel() * t.element_size() for t in tensors)
    layers = []
    for name, module in model.named_modules():
        own = list(module.parameters(recurse=False))
        if own:
            t = sum(p.numel() for p in own if p.requires_grad)
            layers.append({"name": name or "(root)", "type": type(module).__name__,
                           "parameters": sum(p.numel() for p in own), "trainable": t})
    return {
        "class": type(model).__name__,
        "parameters": trainable + frozen,
        "trainable": trainable,
        "frozen": frozen,
        "size_mb": round(size / 2**20, 3),
        "devices": sorted({str(t.device) for t in tensors}),
        "dtypes": sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()}),
        "layers": layers,
    }


def _n(count: int) -> str:
    return f"{count:,}"


def summary_text(info: dict[str, Any]) -> str:
    """``info`` (from :func:`model_summary`) as at most ~16 lines."""
    lines = [f"model: {info['class']}  {_n(info['parameters'])} parameters ({_n(info['trainable'])} trainable, "
             f"{_n(info['frozen'])} frozen)  {info['size_mb']:.2f} MB  on {', '.join(info['devices']) or '-'}  "
             f"{', '.join(info['dtypes']) or '-'}"]
    layers = info["layers"]
    if layers:
        width = max(len(row["name"]) for row in layers[:_MAX_ROWS])
        kinds = max(len(row["type"]) for row in layers[:_MAX_ROWS])
        for row in layers[:_MAX_ROWS]:
            frozen = "" if row["trainable"] == row["parameters"] else \
                f"  ({_n(row['parameters'] - row['trainable'])} frozen)"
            lines.append(f"  {row['name']:<{width}}  {row['type']:<{kinds}}  {_n(row['parameters']):>12}{frozen}")
        if len(layers) > _MAX_ROWS:
            rest = sum(row["parameters"] for row in layers[_MAX_ROWS:])
            lines.append(f"  ... {len(layers) - _MAX_ROWS} more layers, {_n(rest)} parameters")
    return "\n".join(lines)
