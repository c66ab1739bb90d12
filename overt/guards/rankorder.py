"""A ranking metric is a function of the scores, not of the order or the ids its candidates are listed
with (slugs ``ranking-metric-on-labels`` and ``metric-off-definition``; issue 33, session 47).

Two metamorphic properties, true of every correct ranking metric (AP, mAP, mAP@k, AUC, MRR, NDCG,
recall@k, top-k accuracy), checked by calling the user's function again, at the end of the run, on its
first call's own values:

* **Listing order.**  A metric over a set of scored items (detections, retrieved documents, test samples)
  ranks them by their scores: listing the same items in the reverse order, every field of every item kept,
  leaves its value unchanged.  A function whose value moves ranks by a key on which the items tie -- a
  label field, a hard 0/1 prediction, a constant -- so the order they happen to be listed in decides the
  ranking (``ranking-metric-on-labels``: the "scores" it ranks by are labels).  Probed on a list of
  records (equal-length sequences of numbers) or on aligned 1-D tensors/arrays (scores and labels, one per
  item), reversed together.  The premise needs the items to be completely ordered by every field that can
  be a score: every field holding fractional values is free of ties (a correct metric breaks a tie by
  position, so tied scores would move it); silent otherwise, and where no field holds fractional values.
* **Candidate ids.**  A metric of a score matrix ``(N, C)`` (classes, or a gallery's items) and one
  correct candidate per row (integer ids in ``[0, C)``) ranks each row's candidates by score: renaming
  the candidates (the columns reversed, the ids mapped alike) leaves its value unchanged.  A function
  whose value moves ranks by the candidates' ids somewhere (a top-k selected as a set and scored in index
  order, a tie-break by column) -- ``metric-off-definition``.  Silent on rows with tied scores, on fewer
  than three candidates, where another argument has a dimension of the candidates' size (per-class
  weights), and on names of ordinal measures (errors, "within one").

Functions are chosen by their name (a ranking metric's words) and the values of their first call; nothing
is read from how they are written.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator

import numpy as np
import torch

#: names of metrics computed from a ranking of items by their scores (the listing-order probe)
RANKED = frozenset({"ap", "map", "auc", "auroc", "auprc", "roc", "ndcg", "mrr"})
#: names of metrics computed from each row's ranking of candidates (the candidate-ids probe)
PER_ROW = RANKED | frozenset({"hit", "hits", "hitrate", "recall", "precision", "topk", "top", "rank", "ranking",
                              "accuracy", "acc"})
#: words of measures that depend on the candidates' ids or the items' order by design
_NOT = frozenset({"loss", "mae", "mse", "rmse", "error", "err", "ordinal", "within", "adjacent", "off", "ece",
                  "calibration", "expected", "plot", "print", "log", "save", "update", "reset", "train", "step",
                  "point", "adjust", "adjusted", "segment", "event", "curve"})
TOLERANCE = 1e-6


def form_of(words: frozenset[str] | set[str]) -> str | None:
    """"rank-order" for a function named after a ranking metric, else None."""
    if words & _NOT:
        return None
    if words & PER_ROW or {"average", "precision"} <= words:
        return "rank-order"
    return None


def _listing(words: frozenset[str] | set[str]) -> bool:
    return bool(words & RANKED) or {"average", "precision"} <= words


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (torch.Tensor, np.ndarray, np.generic)) and getattr(value, "size", None) is not None:
        n = value.numel() if isinstance(value, torch.Tensor) else value.size
        if n == 1:
            return float(value.item())
    return None


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > TOLERANCE * max(1.0, abs(a), abs(b))


@contextlib.contextmanager
def _modules_run() -> Iterator[list]:
    """A list that holds an entry once any ``nn.Module`` runs inside the block: a function that runs a model
    on its arguments is given inputs, not scores, and renaming or reordering them is no metamorphic change."""
    ran: list = []

    def seen(module: Any, args: Any) -> None:
        if not ran:
            ran.append(type(module).__name__)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(seen)
    try:
        yield ran
    finally:
        handle.remove()


def _both(fn: Callable, bound: dict[str, Any], changed: dict[str, Any]) -> tuple[float, float] | None:
    """The function's value on its call's arguments and on the changed ones, when both are finite numbers and
    no module ran to compute them."""
    from overt.guards.metricdef import _quiet

    try:
        with _modules_run() as ran:
            first = _number(_quiet(fn, **bound))
            moved = _number(_quiet(fn, **changed))
    except Exception:  # noqa: BLE001  the user's function on changed values: no premise
        return None
    if ran or first is None or moved is None or not math.isfinite(first) or not math.isfinite(moved):
        return None
    return first, moved


def _monotonic(values: np.ndarray) -> bool:
    """Sorted one way or the other along the first axis: a list that may already be the ranking."""
    d = np.diff(values, axis=0)
    return bool((d >= 0).all() or (d <= 0).all())


# -- listing order -------------------------------------------------------------------------------------


def _records(x: Any) -> list[list[float]] | None:
    """A list of at least four equal-length sequences of numbers, as floats; else None."""
    if not isinstance(x, list) or len(x) < 4:
        return None
    width = None
    rows = []
    for r in x:
        if not isinstance(r, (list, tuple)) or not r:
            return None
        if width is None:
            width = len(r)
        if len(r) != width or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in r):
            return None
        rows.append([float(v) for v in r])
    return rows


def _fractional_tie_free(columns: list[np.ndarray]) -> bool:
    """Some column holds fractional values, and every such column is free of ties and not already sorted (a
    list in score order may be the ranking itself, which a function may take as given)."""
    scored = [c for c in columns if np.isfinite(c).all() and (c != np.round(c)).any()]
    return bool(scored) and all(len(np.unique(c)) == len(c) and not _monotonic(c) for c in scored)


def _aligned(given: dict[str, Any]) -> tuple[list[str], int] | None:
    """The 1-D tensors/arrays of one length (at least four) among the arguments, when one of them is float."""
    lengths: dict[int, list[str]] = {}
    for p, v in given.items():
        if isinstance(v, torch.Tensor) and v.ndim == 1 or isinstance(v, np.ndarray) and v.ndim == 1:
            lengths.setdefault(len(v), []).append(p)
    if len(lengths) != 1:
        return None
    (n, params), = lengths.items()
    return (params, n) if n >= 4 and len(params) >= 2 else None


def _as_numpy(v: Any) -> np.ndarray:
    return v.detach().cpu().double().numpy() if isinstance(v, torch.Tensor) else np.asarray(v, dtype=np.float64)


def listing_probe(fn: Callable, name: str, words: frozenset[str], given: dict[str, Any], bound: dict[str, Any],
                  result: Any) -> tuple[str, str, str] | None:
    """(what was reordered, the value, the value reordered) when listing the call's items in reverse moves
    the value of a ranking metric; None when it does not or the premise does not hold."""
    if not _listing(words) or _number(result) is None:
        return None
    lists = {p: _records(v) for p, v in given.items() if isinstance(v, list)}
    lists = {p: r for p, r in lists.items() if r is not None}
    changed = dict(bound)
    if len(lists) == 1:
        (param, rows), = lists.items()
        if not _fractional_tie_free([np.array(c) for c in zip(*rows)]):
            return None
        if any(isinstance(v, (list, tuple, torch.Tensor, np.ndarray)) and p != param and _length(v) == len(rows)
               for p, v in given.items()):
            return None  # another argument aligned with the items: reordering one alone would change them
        changed[param] = list(reversed(given[param]))
        what = f"the items of {param!r} listed in reverse"
    elif not lists:
        aligned = _aligned(given)
        if aligned is None:
            return None
        params, _ = aligned
        floats = [_as_numpy(given[p]) for p in params
                  if (given[p].is_floating_point() if isinstance(given[p], torch.Tensor)
                      else given[p].dtype.kind == "f")]
        if not floats or not _fractional_tie_free(floats):
            return None
        for p in params:
            v = given[p]
            changed[p] = v.flip(0).clone() if isinstance(v, torch.Tensor) else v[::-1].copy()
        what = "the items of " + ", ".join(repr(p) for p in params) + " listed in reverse, together"
    else:
        return None
    values = _both(fn, bound, changed)
    if values is None or not _differs(*values):
        return None
    return what, f"{values[0]:.4g}", f"{values[1]:.4g}"


def _length(v: Any) -> int | None:
    try:
        return len(v)
    except TypeError:
        return None


# -- candidate ids -------------------------------------------------------------------------------------


def _is_float(v: Any) -> bool:
    return v.is_floating_point() if isinstance(v, torch.Tensor) else v.dtype.kind == "f"


def _is_int(v: Any) -> bool:
    if isinstance(v, torch.Tensor):
        return not v.is_floating_point() and not v.is_complex() and v.dtype != torch.bool
    return v.dtype.kind in "iu"


def relabel_probe(fn: Callable, name: str, words: frozenset[str], given: dict[str, Any], bound: dict[str, Any],
                  result: Any) -> tuple[str, str, str, str] | None:
    """(scores parameter, ids parameter, the value, the value with the candidates renamed) when renaming the
    candidates of a per-row ranking moves the metric's value; None when it does not or the premise fails."""
    if _number(result) is None:
        return None
    arrays = {p: v for p, v in given.items() if isinstance(v, (torch.Tensor, np.ndarray))}
    matrices = [p for p, v in arrays.items() if v.ndim == 2 and _is_float(v)]
    ids = [p for p, v in arrays.items() if v.ndim == 1 and _is_int(v)]
    if len(matrices) != 1 or len(ids) != 1:
        return None
    scores, labels = arrays[matrices[0]], arrays[ids[0]]
    n, c = scores.shape
    if c < 3 or len(labels) != n or n < 2:
        return None
    for p, v in given.items():
        if p not in (matrices[0], ids[0]) and (isinstance(v, (torch.Tensor, np.ndarray)) and c in tuple(v.shape)
                                               or isinstance(v, (list, tuple)) and len(v) == c):
            return None  # per-candidate weights or names: renaming the candidates would change them
    s, y = _as_numpy(scores), _as_numpy(labels)
    if not np.isfinite(s).all() or y.min() < 0 or y.max() >= c:
        return None
    ordered = np.sort(s, axis=1)
    if (np.diff(ordered, axis=1) == 0).any():
        return None  # tied scores: a correct metric may break ties by column
    if (ordered == s).all() or (ordered[:, ::-1] == s).all():
        return None  # every row already in score order: the columns may be ranks, not candidates
    changed = dict(bound)
    if isinstance(scores, torch.Tensor):
        changed[matrices[0]] = scores.flip(1).clone()
        changed[ids[0]] = (c - 1) - labels
    else:
        changed[matrices[0]] = scores[:, ::-1].copy()
        changed[ids[0]] = (c - 1) - labels
    values = _both(fn, bound, changed)
    if values is None or not _differs(*values):
        return None
    return matrices[0], ids[0], f"{values[0]:.4g}", f"{values[1]:.4g}"
