"""Library ranking metrics judged on the scores they are given (slugs ``ranking-metric-on-labels`` and
``metric-wrong-class-score``; issue 33, session 56).

A binary ranking metric (ROC AUC, average precision) measures how a score orders the positive samples
(label 1) above the negative ones.  Two properties of every correct use, read from the call's own arguments:

* **The metric ranks the scores the program computed.**  torchmetrics' binary ranking metrics take any input
  outside [0, 1] for logits and apply a sigmoid first.  A sigmoid keeps the order of distinct values except
  where it saturates: scores of magnitude above about 17 (float32) all become 1.0 (or 0.0), and the metric
  then ranks the ties, not the scores.  Reported when the values as the metric sees them have at most half as
  many distinct values as the scores given, and the AUROC of the scores given and of the values the metric
  sees differ by :data:`SQUASH_GAP` or more (``ranking-metric-on-labels``: the items tie on the key ranked).
* **A score is never reliably worse than chance.**  A score meant to separate the classes may be weak, but a
  ranking far below chance (AUROC at most :data:`BACKWARDS`, and :data:`SIGMAS` standard errors below 0.5 on
  the call's class counts) carries the separation the other way round: the score handed over is oriented
  against label 1 (negated once too often, the other class's column or probability,
  ``metric-wrong-class-score``).

Watched: scikit-learn's ``roc_auc_score`` and ``average_precision_score`` and torchmetrics' ``binary_auroc``,
``binary_average_precision`` and ``auroc``/``average_precision`` with ``task="binary"`` -- the modules' functions
and the names the script and its own modules bound to them -- from the first evaluation on (installed by
:mod:`overt.guards.metricprobe`, also on a checked training step once the script's namespace grew; put back at the
end of the run); the first :data:`LOOKS` calls are judged on the host (a metric call reads its values anyway;
nothing runs on unchecked training steps).  Silent on anything else:
labels that are not two classes (0/1, -1/1, booleans), scores that are not one finite float per sample, fewer
than :data:`MIN_CLASS` samples of a class, a ``pos_label``, ``thresholds``, ``ignore_index``, ``max_fpr`` or
sample weights given.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

#: module -> function name -> (library, whether the call must say ``task="binary"``)
WATCHED: dict[str, dict[str, tuple[str, bool]]] = {
    "sklearn.metrics": {"roc_auc_score": ("sklearn", False), "average_precision_score": ("sklearn", False)},
    "torchmetrics.functional": {"binary_auroc": ("torchmetrics", False),
                                "binary_average_precision": ("torchmetrics", False),
                                "auroc": ("torchmetrics", True), "average_precision": ("torchmetrics", True)},
}
WATCHED["torchmetrics.functional.classification"] = WATCHED["torchmetrics.functional"]
#: arguments that change what the metric ranks or counts: the call is left alone
_OPTIONS = frozenset({"pos_label", "thresholds", "ignore_index", "max_fpr", "sample_weight", "average",
                      "multi_class", "labels"})
LOOKS = 6  # calls judged per run
MIN_CLASS = 10  # samples of each class a judged call needs
SQUASH_GAP = 0.05  # AUROC lost to the ties the metric's sigmoid made
BACKWARDS = 0.2  # an AUROC at most this far from 0 ...
SIGMAS = 5.0  # ... and this many standard errors below chance


@dataclass(frozen=True)
class Verdict:
    """What a judged call showed: the slug, and the numbers its message gives."""

    slug: str
    auc: float  # the AUROC of the scores as the metric ranks them
    raw_auc: float  # the AUROC of the scores as given
    distinct: int  # distinct scores given
    seen_distinct: int  # distinct values the metric ranks
    positives: int
    negatives: int


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """The area under the ROC curve of ``scores`` for boolean ``labels`` (ties counted as one half), by ranks."""
    values, inverse = np.unique(scores, return_inverse=True)
    counts = np.bincount(inverse, minlength=len(values))
    ends = np.cumsum(counts)
    midranks = ends - (counts - 1) / 2.0  # 1-based average rank of each distinct value
    ranks = midranks[inverse]
    pos = int(labels.sum())
    neg = len(labels) - pos
    return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def _labels(target: Any) -> np.ndarray | None:
    """Two classes as booleans (True: the larger label, the metric's positive class), else None."""
    y = target.detach().cpu().numpy() if isinstance(target, torch.Tensor) else np.asarray(target)
    if y.dtype.kind not in "biuf" or y.ndim != 1:
        return None
    values = np.unique(y)
    if len(values) != 2 or not ({float(v) for v in values} <= {0.0, 1.0} or
                                {float(v) for v in values} == {-1.0, 1.0}):
        return None
    return y == values[1]


def _scores(preds: Any) -> np.ndarray | None:
    """The scores as given, as float64; None for anything but one float per sample."""
    if isinstance(preds, torch.Tensor):
        if not preds.is_floating_point():
            return None
        t = preds.detach().reshape(-1) if preds.ndim == 2 and preds.shape[1] == 1 else preds.detach()
        if t.ndim != 1:
            return None
        return t.cpu().double().numpy()
    s = np.asarray(preds)
    if s.dtype.kind != "f":
        return None
    if s.ndim == 2 and s.shape[1] == 1:
        s = s.reshape(-1)
    return s.astype(np.float64) if s.ndim == 1 else None


def _as_seen(preds: torch.Tensor, library: str, raw: np.ndarray) -> np.ndarray:
    """The values the metric ranks: torchmetrics squashes inputs outside [0, 1] with a sigmoid, in their dtype."""
    if library != "torchmetrics" or ((raw >= 0) & (raw <= 1)).all():
        return raw
    t = preds.detach().reshape(-1)
    return torch.sigmoid(t).cpu().double().numpy()


def judge(library: str, target: Any, preds: Any) -> Verdict | None:
    """The verdict on one call's labels and scores, or None when its premise does not hold or nothing is wrong."""
    y = _labels(target)
    raw = _scores(preds)
    if y is None or raw is None:
        return None
    if len(raw) != len(y) or not np.isfinite(raw).all():
        return None
    pos = int(y.sum())
    neg = len(y) - pos
    if pos < MIN_CLASS or neg < MIN_CLASS:
        return None
    distinct = len(np.unique(raw))
    if distinct < 3:
        return None  # hard labels: ranking-metric-on-labels' static rule names them
    seen = _as_seen(preds, library, raw) if isinstance(preds, torch.Tensor) else raw
    seen_distinct = len(np.unique(seen))
    raw_auc = auroc(y, raw)
    auc = raw_auc if seen is raw else auroc(y, seen)
    if seen is not raw and seen_distinct * 2 <= distinct and abs(raw_auc - auc) >= SQUASH_GAP:
        return Verdict("ranking-metric-on-labels", auc, raw_auc, distinct, seen_distinct, pos, neg)
    se = float(np.sqrt((pos + neg + 1) / (12.0 * pos * neg)))  # the AUROC's spread under chance
    if auc <= BACKWARDS and (0.5 - auc) >= SIGMAS * se:
        return Verdict("metric-wrong-class-score", auc, raw_auc, distinct, seen_distinct, pos, neg)
    return None


def _arguments(library: str, args: tuple, kwargs: dict) -> tuple[Any, Any] | None:
    """(labels, scores) of a call, by the library's argument order."""
    if library == "sklearn":
        first, second = ("y_true", "y_score")
    else:
        first, second = ("preds", "target")
    a = args[0] if args else kwargs.get(first)
    b = args[1] if len(args) > 1 else kwargs.get(second)
    if a is None or b is None:
        return None
    return (a, b) if library == "sklearn" else (b, a)


def _user_spaces() -> list[dict]:
    """The namespaces of ``__main__`` and of the user's own modules (a ``utils.py`` beside the script that
    imported the metric by name)."""
    from overt.guards.where import is_user_file

    spaces = []
    for name, module in list(sys.modules.items()):
        filename = getattr(module, "__file__", None) if module is not None else None
        if name == "__main__" or isinstance(filename, str) and filename.endswith(".py") and is_user_file(filename):
            spaces.append(vars(module))
    return spaces


class LibraryRanking:
    """The wrappers of the watched functions: :meth:`install` (again when the script's namespace grew) and
    :meth:`remove`; ``seen`` is called with (function name, the verdict) on each judged call that has one."""

    def __init__(self, seen: Callable[[str, Verdict], None], failed: Callable[[Exception], None]):
        self.seen = seen
        self.failed = failed
        self.saved: list[tuple[dict, str, Any]] = []  # (namespace, name, original)
        self.looks = 0

    def install(self) -> None:
        if self.looks >= LOOKS:
            return
        users = _user_spaces()
        for module_name, functions in WATCHED.items():
            module = sys.modules.get(module_name)
            if module is None:
                continue
            spaces = [vars(module)] + [space for space in users if space is not vars(module)]
            for name, (library, binary_task) in functions.items():
                orig = getattr(module, name, None)
                if orig is None:
                    continue
                orig = getattr(orig, "__overt_original__", orig)
                wrapper = None
                for space in spaces:
                    for key, value in list(space.items()):
                        if value is orig:
                            wrapper = wrapper or self._wrapper(name, library, binary_task, orig)
                            self.saved.append((space, key, orig))
                            space[key] = wrapper

    def remove(self) -> None:
        for space, key, orig in reversed(self.saved):
            if getattr(space.get(key), "__overt_original__", None) is orig:
                space[key] = orig
        self.saved = []

    def _wrapper(self, name: str, library: str, binary_task: bool, orig: Any) -> Any:
        @functools.wraps(orig)
        def metric(*args: Any, **kwargs: Any) -> Any:
            result = orig(*args, **kwargs)
            if self.looks < LOOKS and not _OPTIONS & kwargs.keys() and \
                    (not binary_task or kwargs.get("task") == "binary") and len(args) <= 2:
                self.looks += 1
                try:
                    pair = _arguments(library, args, kwargs)
                    verdict = judge(library, *pair) if pair is not None else None
                    if verdict is not None:
                        self.seen(name, verdict)
                except Exception as exc:  # noqa: BLE001  never break the user's metric over a check
                    self.failed(exc)
            return result

        metric.__overt_original__ = orig  # type: ignore[attr-defined]
        return metric
