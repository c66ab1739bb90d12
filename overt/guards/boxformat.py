"""Guard on box functions that read corners given boxes in another format (slug ``box-format-mismatch``;
issue 33).

An invariant of every correct detection program: a function that reads boxes as corners
``(x1, y1, x2, y2)`` (an IoU, a GIoU loss, an NMS) is given boxes whose second corner is not before
the first.  Centre boxes ``(cx, cy, w, h)`` or corner-size boxes ``(x, y, w, h)`` read as corners put
``x2 = w`` before ``x1 = cx`` for every box whose centre lies further from the border than its width:
the loss or the metric compares other rectangles, nothing fails, and the regressor learns boxes that
overlap the objects poorly.  The same holds for a box flipped without swapping its corners, or
``(y1, x1, y2, x2)`` data mixed with ``(x, y, w, h)`` ones.

What is seen: functions of the running script (``__main__``, defined in its file) named after a box
operation (``iou``, ``giou``, ``diou``, ``ciou``, ``box``, ``bbox``, ``nms`` among the name's words;
not a format conversion, not one with a format parameter, not one the metric probe of
:mod:`overt.guards.metricprobe` already records) are wrapped on a checked training forward, when the metric
probe sees the script's namespace grow (no work of this check's own on any step).  On
checked steps only, the first call with gradients enabled where one box argument (a tensor of shape
``(N, 4)``, floating point) requires gradients (the prediction) and another does not (data: the
target) is recorded by reference; nothing else is done on any step.

At the end of the run, two things must hold before anything is said:

1. the function reads corners: called (quietly, without gradients, on CPU) with two small sets of
   boxes that are valid in every format, its value is the IoU or GIoU of the rows read as corners (one
   value per row, the matrix of pairs, their mean or sum, or one minus it), and is not that of the rows
   read as ``(x, y, w, h)`` or ``(cx, cy, w, h)``; a function that converts its inputs first, or
   computes something unfamiliar, leaves the check silent;
2. the data argument of the recorded call holds at least 4 rows, a quarter or more of them with
   ``x2 < x1`` or ``y2 < y1``: impossible as corners.

Predictions are never judged (a regressor's early outputs may be anything); calls under ``no_grad``
are not judged (prediction and data cannot be told apart there).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import re
import types
from typing import Any

import torch

from overt.guards import metricprobe
from overt.guards.check import Check
from overt.guards.where import short_location, user_location

#: name words of a function that operates on boxes
BOX_WORDS = frozenset({"iou", "giou", "diou", "ciou", "box", "boxes", "bbox", "bboxes", "nms"})
#: name words of a format conversion or of something else than a box operation
NOT_BOX_OP = frozenset({"to", "convert", "conversion", "xyxy", "xywh", "cxcywh", "cxcy", "center", "centre",
                        "plot", "draw", "show", "print", "log", "save", "load", "encode", "decode", "format",
                        "transform", "flip", "resize", "scale", "clip", "clamp", "rescale", "normalize",
                        "normalise", "denormalize", "denormalise", "anchor", "anchors", "mask", "masks"})
#: parameter names that say the function reads boxes in a format it is told
FORMAT_PARAMS = re.compile(r"fmt|format|xyxy|xywh|cxcy|x1y1x2y2|center|centre", re.I)
#: a quarter of the data boxes or more impossible as corners
SHARE = 0.25
MIN_ROWS = 4
LOOKS = 3  # armed calls of a function looked at before giving up on a premise

# Two sets of three boxes, valid in every format (sizes positive), whose IoU and GIoU differ in every
# format; in units of the data's scale.
_PROBE_A = ((0.10, 0.20, 0.50, 0.60), (0.30, 0.10, 0.70, 0.40), (0.20, 0.30, 0.45, 0.80))
_PROBE_B = ((0.15, 0.25, 0.55, 0.55), (0.25, 0.05, 0.65, 0.50), (0.05, 0.35, 0.40, 0.70))


@functools.lru_cache(maxsize=1024)
def _words(name: str) -> frozenset[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return frozenset(w for w in re.split(r"[_\W]+", spaced) if w)


def box_function(fn: Any) -> bool:
    """Whether ``fn``'s name and parameters say it operates on boxes given in one format."""
    words = _words(getattr(fn, "__name__", ""))
    if not words & BOX_WORDS or words & NOT_BOX_OP:
        return False
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return not any(FORMAT_PARAMS.search(p) for p in params)


def _box_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and x.ndim == 2 and x.shape[-1] == 4 \
        and x.shape[0] > 0


def _corners(b: torch.Tensor, fmt: str) -> torch.Tensor:
    if fmt == "xyxy":
        return b
    if fmt == "xywh":
        return torch.cat([b[:, :2], b[:, :2] + b[:, 2:]], 1)
    half = b[:, 2:] / 2
    return torch.cat([b[:, :2] - half, b[:, :2] + half], 1)


def _overlaps(a: torch.Tensor, b: torch.Tensor, pad: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(IoU, GIoU) of corner boxes ``a`` and ``b`` (broadcast)."""
    wh_a, wh_b = a[..., 2:] - a[..., :2] + pad, b[..., 2:] - b[..., :2] + pad
    inter_wh = (torch.minimum(a[..., 2:], b[..., 2:]) - torch.maximum(a[..., :2], b[..., :2]) + pad).clamp(min=0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    union = wh_a[..., 0] * wh_a[..., 1] + wh_b[..., 0] * wh_b[..., 1] - inter
    iou = inter / union
    hull_wh = (torch.maximum(a[..., 2:], b[..., 2:]) - torch.minimum(a[..., :2], b[..., :2]) + pad).clamp(min=0)
    hull = hull_wh[..., 0] * hull_wh[..., 1]
    return iou, iou - (hull - union) / hull


def _forms(a: torch.Tensor, b: torch.Tensor, fmt: str, pads: tuple[float, ...]) -> list[torch.Tensor]:
    """Every value a function reading ``a`` and ``b`` in format ``fmt`` may return: per row, the matrix of
    pairs, the mean or the sum, of the IoU or GIoU or one minus it."""
    ca, cb = _corners(a, fmt), _corners(b, fmt)
    out = []
    for pad in pads:
        for rows in (_overlaps(ca, cb, pad), _overlaps(ca[:, None], cb[None], pad)):
            for r in rows:
                for v in (r, 1 - r):
                    out += [v.reshape(-1), v.mean().reshape(1), v.sum().reshape(1)]
    return out


def _values(result: Any) -> list[torch.Tensor]:
    """The numbers a function returned (a number, a tensor, or a tuple of them), each flat float64."""
    items = result if isinstance(result, (tuple, list)) and len(result) <= 4 else (result,)
    out = []
    for item in items:
        if isinstance(item, bool):
            continue
        if isinstance(item, (int, float)):
            out.append(torch.tensor([float(item)], dtype=torch.float64))
        elif isinstance(item, torch.Tensor) and item.numel():
            out.append(item.detach().to("cpu", torch.float64).reshape(-1))
    return out


def _matches(values: list[torch.Tensor], forms: list[torch.Tensor]) -> bool:
    for v in values:
        for f in forms:
            if v.numel() == f.numel() and bool(torch.isfinite(v).all()) \
                    and bool(torch.allclose(v, f, atol=1e-4, rtol=1e-4)):
                return True
    return False


def reads_corners(fn: Any, scale: float, dtype: torch.dtype) -> bool | None:
    """Whether ``fn(a, b)`` on two probe box sets is an IoU/GIoU form of the rows read as corners (True),
    of the rows read in another format (False), or neither/an error (None)."""
    a = torch.tensor(_PROBE_A, dtype=torch.float64) * scale
    b = torch.tensor(_PROBE_B, dtype=torch.float64) * scale
    sink = io.StringIO()
    try:
        with torch.no_grad(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            result = fn(a.to(dtype), b.to(dtype))
    except Exception:  # noqa: BLE001  the user's function on other values: no premise
        return None
    values = _values(result)
    if not values:
        return None
    pads = (0.0,) if scale <= 1.5 else (0.0, 1.0)
    corner = _matches(values, _forms(a, b, "xyxy", pads))
    other = _matches(values, _forms(a, b, "xywh", pads) + _forms(a, b, "cxcywh", pads))
    if corner and not other:
        return True
    return False if other and not corner else None


class _Call:
    __slots__ = ("fn", "params", "data", "loc")

    def __init__(self, fn: Any, params: list[str], data: list[tuple[str, torch.Tensor]], loc: str | None):
        self.fn, self.params, self.data, self.loc = fn, params, data, loc


class BoxFormatChecks(Check):
    name = "box_format"

    def __init__(self, session: Any):
        super().__init__(session)
        self.wrapped: dict[str, tuple[Any, Any]] = {}  # name -> (original, wrapper) in __main__
        self.calls: dict[str, list[_Call]] = {}  # name -> its recorded calls (at most LOOKS)
        self.looks: dict[str, int] = {}
        self.namespace: dict | None = None

    def wrap_new(self, namespace: dict, filename: str) -> None:
        """The script's namespace grew, seen on a checked training forward by the metric probe
        (:meth:`overt.guards.metricprobe.MetricProbeChecks.on_checked_forward`, which compares its size
        there: this check adds no work of its own to a step): wrap the box functions defined by now."""
        if self.namespace is not None and namespace is not self.namespace:
            return
        self.namespace = namespace
        for name, fn in list(namespace.items()):
            if name in self.wrapped or not isinstance(fn, types.FunctionType) \
                    or fn.__code__.co_filename != filename or getattr(fn, "__wrapped__", None) is not None \
                    or not box_function(fn) or metricprobe.candidates({name: fn}, filename):
                continue
            wrapper = self._wrapper(name, fn)
            self.wrapped[name] = (fn, wrapper)
            namespace[name] = wrapper

    def _wrapper(self, name: str, fn: Any) -> Any:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def box_op(*args: Any, **kwargs: Any) -> Any:
            if self.s.armed and self.looks.get(name, 0) < LOOKS \
                    and torch.is_grad_enabled():
                try:
                    self._record(name, fn, signature, args, kwargs)
                except Exception as exc:  # noqa: BLE001  a guard never breaks the user's call
                    self.s.check_failed(self, exc)
            return fn(*args, **kwargs)

        return box_op

    def _record(self, name: str, fn: Any, signature: inspect.Signature, args: tuple, kwargs: dict) -> None:
        self.looks[name] = self.looks.get(name, 0) + 1
        bound = signature.bind(*args, **kwargs)
        boxes = [(p, v) for p, v in bound.arguments.items() if _box_tensor(v)]
        if len(boxes) != 2 or len(bound.arguments) != 2:
            return  # further arguments may switch the format or the metric: no premise
        data = [(p, v.detach()) for p, v in boxes if not v.requires_grad]
        if len(data) != 1 or data[0][1].shape[0] < MIN_ROWS:
            return  # a prediction against data is what tells the data apart
        self.calls.setdefault(name, []).append(_Call(fn, [p for p, _ in boxes], data, user_location(3)))

    def end_of_run(self) -> None:
        for name, calls in self.calls.items():
            for call in calls:
                if self._judge(name, call):
                    break
        self.calls = {}

    def _judge(self, name: str, call: _Call) -> bool:
        (param, boxes), = call.data
        b = boxes.to("cpu", torch.float64)
        if not bool(torch.isfinite(b).all()):
            return False
        scale = max(1.0, float(b.abs().max()))
        tol = 1e-6 * scale
        bad = (b[:, 2] < b[:, 0] - tol) | (b[:, 3] < b[:, 1] - tol)
        n_bad, n = int(bad.sum()), b.shape[0]
        if n_bad < MIN_ROWS or n_bad < SHARE * n:
            return False
        if reads_corners(call.fn, scale, boxes.dtype) is not True:
            return False
        code = call.fn.__code__
        defined = short_location(code.co_filename, code.co_firstlineno)
        at = call.loc or "its call"
        row = b[bad.nonzero()[0, 0]].tolist()
        shown = ", ".join(f"{v:.3g}" for v in row)
        self.s.report(
            "box-format-mismatch",
            f"{name}() defined at {defined} reads its boxes as corners (x1, y1, x2, y2): on boxes whose format "
            f"is known its value is their IoU/GIoU read that way. But at {at} its argument {param!r} (data: "
            f"the boxes it is scored against, not a prediction) has {n_bad} of {n} rows with x2 < x1 or "
            f"y2 < y1 (e.g. [{shown}]): boxes in another format (centre (cx, cy, w, h) or corner-size "
            "(x, y, w, h)), or corners flipped without being swapped. Read as corners they are other "
            "rectangles, so the loss or metric compares the wrong boxes and the model learns or is scored "
            "on them, while nothing fails.",
            fix=f"convert the boxes to corners before {name}() (cx, cy, w, h -> cx - w/2, cy - h/2, cx + w/2, "
                "cy + h/2; torchvision.ops.box_convert), for the prediction and the target alike, or write the "
                "function for the format the data is in",
            where=at, key=f"box-format:{defined}")
        return True

    def remove_hooks(self) -> None:
        if self.namespace is not None:
            for name, (fn, wrapper) in self.wrapped.items():
                if self.namespace.get(name) is wrapper:
                    self.namespace[name] = fn
        self.wrapped = {}
