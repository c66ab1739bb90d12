"""Confusion counts recounted on predictions that predict nothing (slug ``metric-off-definition``; issue 33,
session 53).

Premise: a true or false positive is a *positive prediction*, right or wrong.  A function that returns the cells of
a confusion table (a dict, or a named tuple, with keys ``TP``/``FP``/``FN``/``TN`` or ``true_positives`` ...) from
a prediction and a target of labels says itself which label is the negative one: called with that label on both
sides, it counts only true negatives (no TP, FP or FN, and some TN), while every other label of the call, on both
sides, counts only true positives.  Given the call's own target and a prediction that is the negative label
everywhere, nothing is predicted positive, so TP and FP must both be 0; given the call's own prediction and a
target that is the negative label everywhere, nothing is truly positive, so TP and FN must be 0.  Whatever the
counting convention (token or entity level, one-vs-rest summed over the positive classes, strings or ids), these
hold; a count that breaks them mixes cells (false positives counted over every mismatch, the false negatives
among them: chakki-works/seqeval#20, w390).

On the call's own arguments the same counts bound each other: TP + FP is at most the positions predicted positive,
TP + FN at most the positions truly positive (an entity-level count is lower still; a count above them counts a
position twice).  The call must also give the same cells twice (no tally across calls).

Observed on values: the function is chosen by its code (local names or string constants of two count cells or
more), recorded at its first call whose result carries the cells, and called again at the end of the run
(quietly, without gradients, as user code) with filled copies of its own two arguments.  Silent where the
premise cannot be proven: no parameter named as the prediction and one as the target, arguments of different
shapes or of float values, more than :data:`MAX_LABELS` labels, a label whose own comparison counts neither as
a true positive only nor as a true negative only (an ignored label, a convention where every label is positive
and no TN exists), no negative or no positive label, a call that raises or whose cells are not numbers.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

import numpy as np
import torch

#: the names a confusion cell is returned under (lower case, spaces and dashes as underscores)
CELLS = {
    "tp": "TP", "true_positives": "TP", "true_positive": "TP", "truepositives": "TP", "n_tp": "TP", "num_tp": "TP",
    "fp": "FP", "false_positives": "FP", "false_positive": "FP", "falsepositives": "FP", "n_fp": "FP", "num_fp": "FP",
    "fn": "FN", "false_negatives": "FN", "false_negative": "FN", "falsenegatives": "FN", "n_fn": "FN", "num_fn": "FN",
    "tn": "TN", "true_negatives": "TN", "true_negative": "TN", "truenegatives": "TN", "n_tn": "TN", "num_tn": "TN",
}
MAX_LABELS = 32  # labels whose own comparison is called (one call each)
MIN_ITEMS = 2


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_varnames) | set(code.co_names)
    names |= {c for c in code.co_consts if isinstance(c, str) and len(c) <= 20}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return {n.lower() for n in names}


def form_of(fn: Any) -> str | None:
    """"counts" for a function whose code names two confusion cells or more (locals, globals or string
    constants such as ``tp``/``fp``/``'FN'``), else None; whether it returns them is decided by its first call."""
    code = getattr(fn, "__code__", None)
    return _form_of_code(code) if isinstance(code, types.CodeType) else None


@functools.lru_cache(maxsize=1024)  # a script's functions, looked at again at every evaluation pass
def _form_of_code(code: types.CodeType) -> str | None:
    if code.co_argcount < 2:
        return None
    cells = {CELLS[n] for n in _code_names(code) if n in CELLS}
    return "counts" if len(cells) >= 2 else None


def cells_of(result: Any) -> dict[str, float] | None:
    """{cell: count} of a returned dict or named tuple holding TP, FP and FN (and perhaps TN), else None."""
    from overt.guards.metricprobe import _number

    if hasattr(result, "_asdict") and callable(result._asdict):
        result = result._asdict()
    if not isinstance(result, dict):
        return None
    out: dict[str, float] = {}
    for key, value in result.items():
        if not isinstance(key, str):
            continue
        cell = CELLS.get(key.strip().lower().replace(" ", "_").replace("-", "_"))
        if cell is None:
            continue
        number = _number(value)
        if number is None or cell in out or not np.isfinite(number) or number < 0:
            return None
        out[cell] = number
    return out if {"TP", "FP", "FN"} <= set(out) else None


def _leaves(x: Any) -> list | None:
    """The labels of ``x`` in order (a non-float tensor or array, or a list of ints or strings, nested alike),
    else None."""
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() or x.is_complex():
            return None
        return x.reshape(-1).tolist()
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "iub":
            return None
        return x.reshape(-1).tolist()
    if isinstance(x, (list, tuple)):
        out: list = []
        for v in x:
            if isinstance(v, (list, tuple)):
                inner = _leaves(v)
                if inner is None:
                    return None
                out.extend(inner)
            elif isinstance(v, (str, int, np.integer)) and not isinstance(v, float):
                out.append(v.item() if isinstance(v, np.integer) else v)
            else:
                return None
        return out
    return None


def _form(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape))
    if isinstance(x, np.ndarray):
        return ("array", x.shape)
    if isinstance(x, (list, tuple)):
        return ("list", tuple(_form(v) if isinstance(v, (list, tuple)) else "leaf" for v in x))
    return None


def _filled(x: Any, value: Any) -> Any:
    """A copy of ``x`` holding ``value`` everywhere, in its kind, shape, dtype and device."""
    if isinstance(x, torch.Tensor):
        return torch.full_like(x, value)
    if isinstance(x, np.ndarray):
        return np.full_like(x, value)
    return type(x)(_filled(v, value) if isinstance(v, (list, tuple)) else value for v in x)


def fits(bound: dict[str, Any], pred: str | None, target: str | None, result: Any) -> bool:
    """Whether a call has the form the probe reads: cells returned, two label arguments of one form."""
    if pred is None or target is None or cells_of(result) is None:
        return False
    a, b = bound.get(pred), bound.get(target)
    la, lb = _leaves(a), _leaves(b)
    return la is not None and lb is not None and len(la) >= MIN_ITEMS and _form(a) == _form(b)


def _show(label: Any) -> str:
    return repr(label)


def check(fn: Callable, name: str, bound: dict[str, Any], pred: str, target: str) -> tuple[str, str] | None:
    """(message, fix) when the function counts a positive where nothing is predicted (or nothing is true)
    positive, by its own negative label; None otherwise."""
    from overt.guards.metricdef import _quiet

    y_pred, y_true = bound[pred], bound[target]
    labels = list(dict.fromkeys(_leaves(y_true) + _leaves(y_pred)))
    if len(labels) < 2 or len(labels) > MAX_LABELS:
        return None

    def counted(new_pred: Any, new_true: Any) -> dict[str, float] | None:
        args = dict(bound)
        args[pred], args[target] = new_pred, new_true
        try:
            return cells_of(_quiet(fn, **args))
        except Exception:  # noqa: BLE001  the user's function on other labels: no premise
            return None

    first = counted(y_pred, y_true)
    if first is None or counted(y_pred, y_true) != first:
        return None  # counts that accumulate across calls (a global tally) or depend on anything else: no premise
    negative, positive = [], []
    for label in labels:
        got = counted(_filled(y_pred, label), _filled(y_true, label))
        if got is None:
            return None
        if got.get("TN", 0) > 0 and got["TP"] == got["FP"] == got["FN"] == 0:
            negative.append(label)
        elif got["TP"] > 0 and got["FP"] == got["FN"] == 0:
            positive.append(label)
        else:
            return None  # a label the function neither counts as positive nor as negative: no premise
    if len(negative) != 1 or not positive:
        return None
    neg = negative[0]
    truth_positive = sum(1 for v in _leaves(y_true) if v != neg)
    pred_positive = sum(1 for v in _leaves(y_pred) if v != neg)
    fix = (f"count each cell by its definition in {name}(): a false positive is a position predicted positive "
           f"and wrong (prediction != {_show(neg)} and prediction != target), a false negative one truly positive "
           f"and missed; a wrong positive prediction of another positive label may count in both, but a "
           f"prediction of {_show(neg)} is never a positive.  Check it on a prediction of {_show(neg)} "
           "everywhere: TP and FP must be 0.")
    if truth_positive:
        got = counted(_filled(y_pred, neg), y_true)
        if got is not None and (got["TP"] > 0 or got["FP"] > 0):
            return (f"with {pred!r} set to {_show(neg)} everywhere -- the label it counts as negative itself "
                    f"({_show(neg)} on both sides gives only true negatives) -- and {target!r} kept "
                    f"({truth_positive} positive targets), it still returns TP={got['TP']:g}, FP={got['FP']:g}: a "
                    "prediction that predicts nothing positive has no true or false positives, so its FP count "
                    "takes in positions predicted negative (the false negatives among them) and every precision "
                    "or F1 built on it is lower than the model's.", fix)
    if pred_positive:
        got = counted(y_pred, _filled(y_true, neg))
        if got is not None and (got["TP"] > 0 or got["FN"] > 0):
            return (f"with {target!r} set to {_show(neg)} everywhere -- the label it counts as negative itself "
                    f"({_show(neg)} on both sides gives only true negatives) -- and {pred!r} kept "
                    f"({pred_positive} positive predictions), it still returns TP={got['TP']:g}, FN={got['FN']:g}: "
                    "a target with nothing positive has no true positives or false negatives, so its FN count "
                    "takes in positions whose target is negative (the false positives among them) and every "
                    "recall or F1 built on it is lower than the model's.", fix)
    if first["TP"] + first["FP"] > pred_positive or first["TP"] + first["FN"] > truth_positive:
        over = "FP" if first["TP"] + first["FP"] > pred_positive else "FN"
        side, count = (pred, pred_positive) if over == "FP" else (target, truth_positive)
        return (f"on its own call it returns TP={first['TP']:g}, {over}={first[over]:g}, more than the "
                f"{count} positions of {side!r} that carry a positive label (any other than {_show(neg)}, the "
                f"label it counts as negative itself: {_show(neg)} on both sides gives only true negatives): every "
                f"{'true or false positive is a positive prediction' if over == 'FP' else 'true positive or false negative is a positive target'}"
                ", so the cells count some positions twice or positions that are not theirs, and every precision, "
                "recall or F1 built on them is off.", fix)
    return None
