"""A metric does not score the predictions where the target is the label training ignored (slug
``metric-off-definition``; issue 33, session 52).

The premise: a classification loss given ``ignore_index=c`` declares that a target ``c`` carries no label --
padding, sub-word tokens, unlabelled or void pixels, a class left out of training.  The model is taught
nothing at those positions, and every metric with an ignored label (torchmetrics' ``ignore_index``, the
Cityscapes and VOC evaluations, seqeval) leaves them out whole: what the model predicts where the target is
``c`` does not enter the number.  A metric function of the program's evaluation is called again on its own
first call with the predictions at exactly those positions changed, every other position and the target
kept; its value must not move.  One that moves scores predictions nobody labelled: pixels of the ignored
class kept in the other classes' unions after its own score was dropped (torchmetrics#312), void pixels
counted as false positives of the class predicted there, padding tokens counted in a token F1.

When the premise is proven (the metric must ignore ``c``):

- ``c`` is outside the training loss's classes (``-100``, ``255``, ``-1``): no prediction can be right there,
  so no correct metric scores those positions;
- ``c`` is one of the classes, and the metric function itself reads the ignored value: a parameter named like
  an ignore index (``ignore_index``, ``ignore``, ``void``) or a module-level name of that kind read by its code,
  holding ``c`` -- the function says it ignores ``c``.  Without that, a metric over every class may score
  ``c`` on purpose (an evaluation of all classes of a model that was trained on some), so nothing is concluded.

Silent unless: the training loss (``cross_entropy``/``nll_loss`` on a checked step) ignored ``c`` with its
class dimension known; the call's prediction and target are integer label tensors or arrays of one shape;
``c`` is at least ``MIN_SHARE`` and at most ``MAX_SHARE`` of the targets; every prediction is a class id; the
function gives one finite number on its own arguments again (a function with state, or one that raises on the
changed predictions, proves nothing).  The changed predictions are class ids the model could output: the
next class (``(p + 1) mod C``) and, for ``c`` a class, ``c`` itself.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import numpy as np
import torch

from overt.guards.losses import ignore_index_of

#: the classification losses whose ignore_index is read (their input's dimension 1 holds the classes)
INDEX_LOSSES = frozenset({"cross_entropy", "nll_loss"})
#: name words of a parameter or module-level name that holds the ignored label
_IGNORE_WORDS = ("ignore", "void", "unlabel", "ignored")
MIN_SHARE, MAX_SHARE = 0.005, 0.95
#: how far a value may move on the changed predictions before it is reported (relative; exact counts move by far
#: more, float rounding by far less)
RELATIVE = 1e-4


def index_losses(inp: Any, args: tuple, kwargs: dict) -> tuple[int, int] | None:
    """(ignored label, number of classes) of a checked call of one of :data:`INDEX_LOSSES`, else None."""
    if not isinstance(inp, torch.Tensor) or inp.dim() < 2:
        return None
    try:
        return ignore_index_of(args, kwargs), int(inp.shape[1])
    except (TypeError, ValueError):
        return None


def _labels(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            return None
        return x.detach().to("cpu", torch.int64)
    if isinstance(x, np.ndarray) and x.dtype.kind in "iu":
        return torch.as_tensor(x.astype(np.int64))
    return None


def _like(values: torch.Tensor, original: Any) -> Any:
    """``values`` in the form of ``original`` (a tensor of its dtype and device, or a numpy array of its dtype)."""
    if isinstance(original, torch.Tensor):
        return values.to(device=original.device, dtype=original.dtype)
    return values.numpy().astype(original.dtype)


def _copy(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x.copy()


def _told(fn: Callable, bound: dict[str, Any], ignored: int) -> str | None:
    """Where the function says it ignores ``ignored``: a parameter or a module-level name read by its code,
    named like an ignore index and holding that value; else None."""
    for param, value in bound.items():
        if any(w in param.lower() for w in _IGNORE_WORDS) and _holds(value, ignored):
            return f"its parameter {param}={ignored}"
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    if code is None:
        return None
    for name in _read_names(code):
        if any(w in name.lower() for w in _IGNORE_WORDS) and _holds(names.get(name), ignored):
            return f"the name {name} = {ignored} it reads"
    return None


def _read_names(code: Any) -> list[str]:
    out = list(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            out += _read_names(const)
    return out


def _holds(value: Any, ignored: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == ignored


def _value(fn: Callable, signature: inspect.Signature, arguments: dict[str, Any]) -> float | None:
    from overt.guards.metricdef import _quiet
    from overt.guards.metricprobe import _number

    try:
        bound = inspect.BoundArguments(signature, arguments)  # type: ignore[arg-type]
        value = _number(_quiet(fn, *bound.args, **bound.kwargs))
    except Exception:  # noqa: BLE001  the user's function on other values: no premise
        return None
    return value if value is not None and math.isfinite(value) else None


def check(fn: Callable, name: str, signature: inspect.Signature, pred: str, target: str, bound: dict[str, Any],
          ignored: dict[int, int]) -> tuple[str, str] | None:
    """(message, fix) when ``fn``'s value on its call (``bound``: the arguments by name) moves with the
    predictions at positions whose target is a label the training loss ignored (``ignored``: label -> number of
    classes); None when it does not or the premise is not proven."""
    p, t = _labels(bound.get(pred)), _labels(bound.get(target))
    if p is None or t is None or p.shape != t.shape or p.numel() < 2:
        return None
    for label, classes in sorted(ignored.items()):
        if classes < 2:
            continue
        at = t == label
        share = float(at.float().mean())
        if not MIN_SHARE <= share <= MAX_SHARE:
            continue
        if bool(((p < 0) | (p >= classes)).any()):
            continue  # predictions that are no class ids of the trained output: another space
        inside = 0 <= label < classes
        told = _told(fn, bound, label) if inside else None
        if inside and told is None:
            continue  # a class the metric may score on purpose
        base_args = dict(bound)
        base_args[pred], base_args[target] = _copy(bound[pred]), _copy(bound[target])
        base = _value(fn, signature, base_args)
        if base is None:
            continue
        variants = [("the next class ((p + 1) mod C)", torch.where(at, (p + 1) % classes, p))]
        if inside:
            variants.append((f"the ignored label {label} itself", torch.where(at, torch.full_like(p, label), p)))
        for what, changed in variants:
            args = dict(base_args)
            args[pred], args[target] = _like(changed, bound[pred]), _copy(bound[target])
            moved = _value(fn, signature, args)
            if moved is None or abs(moved - base) <= RELATIVE * max(1.0, abs(base)):
                continue
            why = f"{told}, and the training loss ignores it" if told else \
                f"ignore_index={label} of the training loss, outside its {classes} classes"
            return (f"{name}() scores the predictions where the target is the ignored label {label} ({why}; "
                    f"{share:.1%} of the call's targets): with only those predictions changed to {what}, every "
                    f"labelled position and the target kept, it gives {moved:.4g} instead of {base:.4g}. The model "
                    "was taught nothing there, and a metric with an ignored label leaves those positions out "
                    "whole; one that keeps them (pixels of the ignored class left in the other classes' unions "
                    "after its own score is dropped, unlabelled positions counted as false positives of the "
                    "class predicted there) reports a number that moves with predictions nobody labelled.",
                    f"drop the positions whose target is {label} before scoring in {name}() (keep = target != "
                    f"{label}; score pred[keep] against target[keep], or zero the ignored row of the confusion "
                    "matrix), not only the ignored class's own score; torchmetrics' ignore_index does this.")
    return None
