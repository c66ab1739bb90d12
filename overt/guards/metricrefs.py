"""Small reference implementations of well-known metrics, under every convention in common use
(slug ``metric-off-definition``; issue 33).

A metric function written by hand and named after a well-known metric (a box IoU, a word error rate,
an NDCG) can be recomputed on the same call's inputs by its definition.  Each metric here is given
with the conventions that are accepted for it, and only those: a user's value that matches one of
them is that metric; a value that matches none is something else reported under the metric's name.
The conventions depend on the inputs where the definition says so (the ``+ 1`` of the integer pixel
convention of box sizes is one pixel; on coordinates normalised to ``[0, 1]`` it is the whole image
and no convention).  Every function here returns None when its premise does not hold (an unfamiliar
input, a size it would take long to compute): the check then concludes nothing.

Pure functions of their inputs; no hooks, no session.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import torch

#: how close a user's value must be to a convention's to be that convention
ATOL, RTOL = 1e-3, 1e-3
#: most dynamic-programming cells an edit-distance reference may take (a few tenths of a second)
MAX_CELLS = 3_000_000


def close(value: Any, reference: torch.Tensor) -> bool:
    """``value`` (a number or a tensor of the reference's size) equals ``reference``."""
    got = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    ref = reference.to(torch.float64).reshape(-1)
    if got.numel() != ref.numel() or not bool(torch.isfinite(got).all()):
        return False
    return bool(torch.allclose(got, ref, atol=ATOL, rtol=RTOL))


def values(result: Any) -> torch.Tensor | None:
    """The numbers a metric returned, as a float64 tensor (a number, a tensor, an array), else None."""
    if isinstance(result, bool):
        return None
    try:
        if isinstance(result, torch.Tensor):
            out = result.detach().to("cpu", torch.float64)
        elif isinstance(result, (int, float)) or (hasattr(result, "dtype") and hasattr(result, "shape")):
            out = torch.as_tensor(result, dtype=torch.float64)
        else:
            return None
    except (TypeError, ValueError, RuntimeError):
        return None
    return out if out.numel() and bool(torch.isfinite(out).all()) else None


# --------------------------------------------------------------------------- boxes


def as_boxes(x: Any) -> torch.Tensor | None:
    """A float64 ``(N, 4)`` tensor of the boxes in ``x`` (a tensor or array of shape ``(4,)`` or ``(N, 4)``)."""
    if isinstance(x, torch.Tensor):
        t = x.detach().to("cpu", torch.float64)
    elif hasattr(x, "shape") and hasattr(x, "dtype") and getattr(x.dtype, "kind", "") in "fiu":
        t = torch.as_tensor(x.astype("float64"))
    else:
        return None
    if t.ndim == 1:
        t = t[None]
    if t.ndim != 2 or t.shape[-1] != 4 or t.shape[0] == 0 or not bool(torch.isfinite(t).all()):
        return None
    return t


def normalised(*boxes: torch.Tensor) -> bool:
    """Coordinates relative to the image size (all within about ``[0, 1]``, not all whole numbers): a
    ``+ 1`` there is the size of the whole image, not one pixel."""
    every = torch.cat([b.reshape(-1) for b in boxes])
    return bool((every.abs() <= 1.5).all()) and not bool((every == every.round()).all())


def _corners(b: torch.Tensor, fmt: str) -> torch.Tensor:
    if fmt == "xyxy":
        return b
    if fmt == "xywh":
        return torch.cat([b[:, :2], b[:, :2] + b[:, 2:]], 1)
    half = b[:, 2:] / 2  # cxcywh
    return torch.cat([b[:, :2] - half, b[:, :2] + half], 1)


def _overlap(a: torch.Tensor, b: torch.Tensor, pad: float, giou: bool) -> torch.Tensor:
    """IoU (or GIoU) of corner boxes ``a`` and ``b`` (broadcast), sizes counted with ``pad`` added."""
    wh_a = a[..., 2:] - a[..., :2] + pad
    wh_b = b[..., 2:] - b[..., :2] + pad
    inter_wh = (torch.minimum(a[..., 2:], b[..., 2:]) - torch.maximum(a[..., :2], b[..., :2]) + pad).clamp(min=0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    union = wh_a[..., 0] * wh_a[..., 1] + wh_b[..., 0] * wh_b[..., 1] - inter
    iou = inter / union
    if not giou:
        return iou
    hull_wh = (torch.maximum(a[..., 2:], b[..., 2:]) - torch.minimum(a[..., :2], b[..., :2]) + pad).clamp(min=0)
    hull = hull_wh[..., 0] * hull_wh[..., 1]
    return iou - (hull - union) / hull


def _judge(a: torch.Tensor, b: torch.Tensor, value: torch.Tensor, pad: float,
           giou: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Corner boxes ``a``, ``b`` against a user's ``value`` (flat): None when ``value`` is this convention's
    IoU or cannot be judged against it, else (the user's values, the convention's) on the rows judged.
    One value per row is judged on the rows that are boxes on both sides (a negative size is handled
    differently by every implementation); a matrix of pairs or a mean only when every row is a box."""
    valid_a = (a[:, 2:] >= a[:, :2]).all(1)
    valid_b = (b[:, 2:] >= b[:, :2]).all(1)
    with torch.no_grad():
        if a.shape == b.shape and value.numel() == a.shape[0]:
            rows = valid_a & valid_b
            if not bool(rows.any()):
                return None
            got, expected = value[rows], _overlap(a[rows], b[rows], pad, giou)
        elif not bool(valid_a.all()) or not bool(valid_b.all()):
            return None
        elif value.numel() == a.shape[0] * b.shape[0]:
            got, expected = value, _overlap(a[:, None], b[None], pad, giou).reshape(-1)
        elif value.numel() == 1 and a.shape == b.shape:
            got, expected = value, _overlap(a, b, pad, giou).mean().reshape(1)
        else:
            return None
    if not bool(torch.isfinite(expected).all()) or close(got, expected):
        return None
    return got, expected


def box_mismatch(a: torch.Tensor, b: torch.Tensor, value: torch.Tensor,
                 giou: bool) -> tuple[torch.Tensor, torch.Tensor, bool] | None:
    """When ``value`` (what a user's IoU/GIoU returned for boxes ``a`` and ``b``) is the metric under no
    accepted convention -- corner (x1, y1, x2, y2), corner-size (x, y, w, h) or centre-size (cx, cy, w, h)
    boxes, sizes continuous or (pixel coordinates only, not normalised ones) counted with ``+ 1``; one
    value per row, the matrix of every pair, or the mean over rows -- and every convention could be
    judged: (the user's values, the corner convention's, on the rows judged; whether ``value`` is the
    pixel ``+ 1`` applied to normalised coordinates).  Else None."""
    value = value.reshape(-1).to(torch.float64)
    pads = (0.0,) if normalised(a, b) else (0.0, 1.0)
    first = None
    for fmt in ("xyxy", "xywh", "cxcywh"):
        ca, cb = _corners(a, fmt), _corners(b, fmt)
        for pad in pads:
            judged = _judge(ca, cb, value, pad, giou)
            if judged is None:
                return None
            first = first or judged
    assert first is not None
    pixel = normalised(a, b) and _judge(a, b, value, 1.0, giou) is None
    return first[0], first[1], pixel


# --------------------------------------------------------------------------- error rates

_PLAIN = re.compile(r"[a-z0-9' ]*|[A-Z0-9' ]*")


def transcripts(x: Any) -> list[str] | None:
    """``x`` as a list of plain transcripts (one string, or a list/tuple of strings): lower-case (or
    upper-case) letters, digits, apostrophes and spaces, so that no text normalisation a metric may
    apply changes them beyond the spacing; else None."""
    items = [x] if isinstance(x, str) else list(x) if isinstance(x, (list, tuple)) else None
    if not items or not all(isinstance(s, str) for s in items):
        return None
    return items if all(_PLAIN.fullmatch(s) for s in items) else None


def evenly_spaced(texts: list[str]) -> bool:
    """No leading, trailing or repeated spaces (where counting characters, conventions differ)."""
    return all(s == s.strip() and "  " not in s for s in texts)


def edit_distance(ref: Sequence[Any], hyp: Sequence[Any]) -> int:
    """Levenshtein distance (substitutions, deletions, insertions: 1 each)."""
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def _units(text: str, unit: str) -> list[str]:
    if unit == "words":
        return text.split()
    if unit == "tokens":  # words split at every single space (empty words between repeated spaces)
        return text.split(" ")
    if unit == "chars":
        return list(text)
    return list(text.replace(" ", ""))  # characters without the spaces


def error_rates(refs: list[str], hyps: list[str], unit: str) -> list[float] | None:
    """The error rate of ``hyps`` against ``refs`` counted in ``unit`` (words, tokens: split at each
    space, chars, nospace: chars without spaces): over the corpus (edits summed over the references'
    lengths summed) and averaged over the utterances, each as a fraction and in percent.  None when a
    reference is empty (conventions differ there) or the computation would take long."""
    pairs = [(_units(r, unit), _units(h, unit)) for r, h in zip(refs, hyps)]
    if not pairs or any(not r for r, _ in pairs) or sum(len(r) * len(h) for r, h in pairs) > MAX_CELLS:
        return None
    edits = [edit_distance(r, h) for r, h in pairs]
    corpus = sum(edits) / sum(len(r) for r, _ in pairs)
    mean = sum(e / len(r) for e, (r, _) in zip(edits, pairs)) / len(pairs)
    return [corpus, mean, 100 * corpus, 100 * mean]


def matches_rate(value: float, refs: list[str], hyps: list[str], unit: str) -> bool | None:
    """``value`` is the ``unit`` error rate of the pair in either order (which argument is the
    reference is not known from the call); None when no reference value can be computed."""
    known = [error_rates(refs, hyps, unit), error_rates(refs=hyps, hyps=refs, unit=unit)]
    values = [v for group in known if group is not None for v in group]
    if not values:
        return None
    return any(abs(value - v) <= ATOL + RTOL * abs(v) for v in values)


# --------------------------------------------------------------------------- ranking


def sequence(x: Any, integers: bool) -> list | None:
    """``x`` as a flat Python list when it is one sequence of at least two numbers (a 1-D list, tuple,
    array or tensor; with ``integers``, of integer type only), else None."""
    if isinstance(x, torch.Tensor):
        if x.ndim != 1 or x.dtype == torch.bool or (integers and x.is_floating_point()):
            return None
        values = x.detach().cpu().tolist()
    elif hasattr(x, "shape") and hasattr(x, "tolist") and hasattr(x, "dtype"):
        if len(x.shape) != 1 or (integers and getattr(x.dtype, "kind", "") not in "iu"):
            return None
        values = x.tolist()
    elif isinstance(x, (list, tuple)):
        values = list(x)
    else:
        return None
    kinds = (int,) if integers else (int, float)
    if len(values) < 2 or not all(isinstance(v, kinds) and not isinstance(v, bool) for v in values):
        return None
    return values


def relevances(x: Any) -> list[float] | None:
    """``x`` as a list of graded relevances in ranked order (a 1-D list, array or tensor of
    non-negative numbers with at least one positive), else None."""
    values = sequence(x, integers=False)
    if values is None or any(not math.isfinite(v) or v < 0 for v in values) or not any(v > 0 for v in values):
        return None
    return [float(v) for v in values]


def ndcg(rels: list[float], k: int | None) -> list[float]:
    """NDCG@k of a ranked list of relevances under the accepted conventions: gain ``rel`` or
    ``2**rel - 1``, discount ``1 / log2(rank + 1)`` (rank from 1), the ideal DCG of the same
    relevances sorted (the only ideal a list alone gives)."""
    cut = len(rels) if k is None else k

    def dcg(values: list[float], gain: Any) -> float:
        return sum(gain(v) / math.log2(i + 2) for i, v in enumerate(values[:cut]))

    out = []
    for gain in (lambda v: v, lambda v: 2.0 ** v - 1.0):
        ideal = dcg(sorted(rels, reverse=True), gain)
        out.append(dcg(rels, gain) / ideal if ideal > 0 else 0.0)
    return out


def top_pair(rels: list[float]) -> tuple[list[float], list[float]] | None:
    """Two orderings of the same relevances: a most relevant item at rank 1 and a least relevant one at
    rank 2, the rest in their order; and the same with those two swapped.  Permutations of one list, so
    the ideal DCG of any convention (from the list, or from the user's whole set of relevant items) is
    the same for both, and every NDCG scores the first strictly higher.  None when all are equal."""
    hi = max(range(len(rels)), key=lambda i: rels[i])
    lo = min(range(len(rels)), key=lambda i: rels[i])
    if rels[hi] <= rels[lo]:
        return None
    rest = [v for i, v in enumerate(rels) if i not in (hi, lo)]
    return [rels[hi], rels[lo]] + rest, [rels[lo], rels[hi]] + rest


def like(values: Sequence[float], original: Any) -> Any:
    """``values`` in the container and dtype of ``original`` (list, tuple, numpy array, tensor)."""
    if isinstance(original, torch.Tensor):
        return torch.tensor(values, dtype=original.dtype, device=original.device)
    if hasattr(original, "shape") and hasattr(original, "dtype"):
        import numpy as np

        return np.asarray(values).astype(original.dtype)
    cast = int if all(isinstance(v, int) for v in original) else float
    out = [cast(v) for v in values]
    return tuple(out) if isinstance(original, tuple) else out
