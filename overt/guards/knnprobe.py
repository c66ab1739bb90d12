"""A nearest-neighbour classifier credits only the labels its neighbours carry (slug ``metric-off-definition``;
issue 33, session 46).

The premise, true of every correct k-NN evaluation (majority or weighted vote, any ``k``, top-1 or top-n
accuracy, a re-identification rank-n): the classifier predicts from the labels of the training items it
retrieves, so when every training label is one class ``a``, no test item of another class ``b`` can be
classified correctly, at any cut.  A function that breaks it reports evidence that is not there: a top-5
accuracy read from a vote over fewer than five classes (the classes with no vote tie at 0 and fill the cut
in index order), neighbour labels looked up in the test labels, a hit counted whenever the label appears
anywhere in the score table.

The check is a metamorphic call of the user's function (named after a k-NN / nearest-neighbour
classifier, with one parameter holding the training labels and one the test labels) at the end of the
run, on its first call's own features: the training labels replaced by one class, the test labels by
another (two choices of that class, the smallest and the largest of the labels after it, so that an
order of ties does not hide the bug).  Every number it returns must then be 0 (a number the new labels leave
as it was, such as a count of test items, is not read as an accuracy).  Silent when the premise
cannot be proven: parameters whose roles the names do not say, labels that are not one integer tensor or
array per item, fewer than two classes, a call that raises (a classifier that refuses a single class), a
result that is not numbers (a number, or a tuple/list/dict of them), or a first call whose numbers are not
accuracies (outside [0, 100]).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

_NEIGHBOUR = frozenset({"neighbor", "neighbors", "neighbour", "neighbours"})
_NOT = frozenset({"loss", "graph", "build", "index", "search", "plot", "save", "update", "distance", "distances",
                  "error", "errors", "err", "mse", "mae", "rmse", "entropy"})
_LABEL = ("label", "target", "class", "ids", "pid")
_TRAIN = ("train", "support", "gallery", "bank", "memory", "database", "db", "fit", "ref")
_TEST = ("test", "query", "val", "eval")


def definition_of(words: set[str]) -> str | None:
    """"knn" for a function named after a k-NN / nearest-neighbour classifier, else None."""
    if words & _NOT:
        return None
    if words & {"knn", "kneighbors", "kneighbours"} or ("nearest" in words and words & _NEIGHBOUR):
        return "knn"
    return None


def _role(param: str, side: tuple[str, ...]) -> bool:
    """``param`` names the labels of ``side`` (the training or the test items)."""
    low = param.lower()
    words = low.split("_")
    short = {"ytr": _TRAIN, "yte": _TEST, "ytrain": _TRAIN, "ytest": _TEST, "yval": _TEST, "yq": _TEST}
    if low.replace("_", "") in short:
        return short[low.replace("_", "")] is side
    if "y" in words or any(w in low for w in _LABEL):
        return any(s in low for s in side)
    return False


def _labels(x: Any) -> np.ndarray | None:
    if isinstance(x, torch.Tensor):
        if x.ndim != 1 or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool or x.numel() < 2:
            return None
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "iu" and x.size >= 2:
        return x
    return None


def _like(value: int, original: Any) -> Any:
    if isinstance(original, torch.Tensor):
        return torch.full_like(original, value)
    return np.full_like(original, value)


def _numbers(result: Any) -> list[float] | None:
    if isinstance(result, dict):
        result = list(result.values())
    if not isinstance(result, (list, tuple)):
        result = [result]
    out = []
    for v in result:
        if isinstance(v, bool):
            return None
        if isinstance(v, (torch.Tensor, np.ndarray, np.generic)):
            if getattr(v, "size", None) not in (1, None) and not (isinstance(v, torch.Tensor) and v.numel() == 1):
                return None
            v = v.item()
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return None
        out.append(float(v))
    return out or None


def check(fn: Callable, name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    """(message, fix) when the classifier scores test items of a class no training label carries above 0."""
    from overt.guards.metricdef import _quiet

    train = [p for p in given if _role(p, _TRAIN) and not _role(p, _TEST)]
    test = [p for p in given if _role(p, _TEST) and not _role(p, _TRAIN)]
    if len(train) != 1 or len(test) != 1:
        return None
    tr, te = _labels(given[train[0]]), _labels(given[test[0]])
    first = _numbers(result)
    if tr is None or te is None or first is None or any(not 0.0 <= v <= 100.0 for v in first):
        return None
    classes = sorted({int(v) for v in np.concatenate([tr, te])})
    if len(classes) < 2:
        return None
    a = classes[0]
    for b in sorted({classes[1], classes[-1]}):
        args = dict(bound)
        args[train[0]] = _like(a, given[train[0]])
        args[test[0]] = _like(b, given[test[0]])
        try:
            values = _numbers(_quiet(fn, **args))
        except Exception:  # noqa: BLE001  the user's function on other labels: no premise
            return None
        if values is None or len(values) != len(first):
            return None
        # a number the labels do not move (a count of test items, a mean distance) is no accuracy of them
        credited = [i for i, v in enumerate(values) if v > 0 and v != first[i]]
        if credited:
            shown = ", ".join(f"{v:.4g}" for v in values)
            return (f"{name}() scores test items of class {b} at {shown} when every training label "
                    f"({train[0]!r}) is class {a} (its call's own features, {test[0]!r} set to {b}): a "
                    f"nearest-neighbour classifier predicts from the labels its neighbours carry, so with no "
                    f"training item of class {b} no test item of it can be right at any cut. The function "
                    f"credits classes that got no vote (a top-n cut wider than the classes the k neighbours "
                    f"voted for, whose zero scores tie and fill it in index order), or reads the neighbours' "
                    f"labels from somewhere else than the training labels.",
                    f"count a hit only for classes with a vote: narrow a top-n cut to min(n, k) (or mask "
                    f"zero-score classes), and look the neighbours' labels up in {train[0]!r}; check "
                    f"{name}() with one training class: every accuracy must be 0 for the other classes")
    return None
