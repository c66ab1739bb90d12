"""Ranking and reconstruction metrics recomputed by their definitions (slug ``metric-off-definition``;
issue 33, round nine).

A function named after a ranking metric of one query (recall@k, precision@k, hit@k, MRR) is recomputed
on its call's own ranked list: the retrieved ids with the relevant ids (as a list or set), or the list's
0/1 relevances in ranked order; ``k`` given as an argument or implied by the list's length.  A PSNR is
checked against the data range of its call's inputs: its value implies a peak (``mse * 10**(psnr/10) =
peak**2``, over the whole batch or averaged per image), and a peak below the target's range (max - min) is
no convention (1 on [0, 1] images, 255 on 8-bit ones, the target's max - min all are).  An MAE/MSE/RMSE
given integer arrays is recomputed in floating point; a value that is the same error computed in the
inputs' integer dtype (``a - b`` wrapping below zero) is reported.  Anything unfamiliar (two-dimensional
batches, duplicated ids, unnamed roles, further arguments) leaves the check silent.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

#: name words that make a ranking name a ranking metric (an @k, a top-k, a cut-off number)
_AT = frozenset({"at", "k", "topk", "top", "hits"})
#: parameter names of a cut-off
CUTOFF = frozenset({"k", "topk", "top_k", "at_k", "n", "cutoff"})
#: parameter-name words of the relevant set, and of the ranked list
_RELEVANT = ("relev", "gt", "true", "target", "label", "positive", "truth", "actual", "gold", "answer")
_RANKED = ("retriev", "pred", "rank", "recommend", "top", "result", "candidate", "hyp", "ordered", "sorted")
#: parameter names of a PSNR's peak
PEAK = frozenset({"factor", "max_val", "max_value", "data_range", "peak", "pixel_max", "max_pixel", "maxval",
                  "max_i", "val_range", "value_range", "peak_value", "max_intensity", "eps", "epsilon"})


def definition_of(words: set[str]) -> str | None:
    """"recall@k", "precision@k", "hit@k", "mrr", "psnr", "mae", "mse" or "rmse" for a function named with
    ``words``, else None."""
    ranked = bool(words & _AT) or any(w.isdigit() for w in words)
    if "mrr" in words or {"reciprocal", "rank"} <= words:
        return "mrr"
    if "recall" in words and ranked:
        return "recall@k"
    if "precision" in words and ranked and not words & {"average", "mean"}:
        return "precision@k"
    if words & {"hit", "hits", "hitrate"} and ranked:
        return "hit@k"
    if "psnr" in words:
        return "psnr"
    for name in ("rmse", "mse", "mae"):
        if name in words:
            return name
    return None


def _ids(x: Any) -> list | None:
    if isinstance(x, torch.Tensor):
        if x.ndim != 1 or x.is_floating_point() or x.dtype == torch.bool:
            return None
        return x.tolist()
    if isinstance(x, np.ndarray):
        if x.ndim != 1 or x.dtype.kind not in "iuUO":
            return None
        return x.tolist()
    if isinstance(x, (list, tuple, set, frozenset)):
        values = list(x)
        if all(type(v) is int for v in values) or all(type(v) is str for v in values):
            return values
    return None


def _one_id(x: Any) -> list | None:
    """A single relevant item (a Python int or a 0-d integer tensor/array) as a list of one id."""
    if type(x) is int:
        return [x]
    if isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim == 0 and _ids(x.reshape(1)) is not None:
        return [int(x.item())]
    return None


def _role(param: str, words: tuple[str, ...]) -> bool:
    return any(w in param.lower() for w in words)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        out = float(value.item() if hasattr(value, "item") and getattr(value, "size", 1) in (1, None)
                    else value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return out if math.isfinite(out) else None


def _hits_list(given: dict[str, Any], bound: dict[str, Any]) -> tuple[list[int], int, str, int | None, list | None] \
        | None:
    """(0/1 hits of the ranked list, how many relevant items there are, the list's parameter, k) of the call."""
    others = {p: v for p, v in given.items() if p.lower() in CUTOFF}
    if len(others) > 1:
        return None
    k = next(iter(others.values()), None)
    if k is None:
        cuts = [v for p, v in bound.items() if p.lower() in CUTOFF and p not in given]
        k = cuts[0] if len(cuts) == 1 else None
    if k is not None and (type(k) is not int or k < 1):
        return None
    data = {p: v for p, v in given.items() if p.lower() not in CUTOFF}
    if any(p not in given and p.lower() not in CUTOFF and v is not None for p, v in bound.items()):
        return None  # a further parameter with a default: a switch we do not know
    if len(data) == 2:
        ranked = [p for p in data if _role(p, _RANKED) and not _role(p, _RELEVANT)]
        relevant = [p for p in data if _role(p, _RELEVANT) and not _role(p, _RANKED)]
        if len(ranked) != 1 or len(relevant) != 1 or isinstance(data[ranked[0]], (set, frozenset)):
            return None
        order, wanted = _ids(data[ranked[0]]), _ids(data[relevant[0]]) or _one_id(data[relevant[0]])
        if order is None or wanted is None or not wanted or len(set(order)) != len(order) or len(order) < 2:
            return None
        if not isinstance(data[relevant[0]], (set, frozenset)) and len(wanted) > 1 \
                and (len(set(wanted)) != len(wanted) or set(wanted) <= {0, 1}):
            return None  # a 0/1 relevance per document, not a list of relevant ids
        return [int(v in set(wanted)) for v in order], len(set(wanted)), ranked[0], k, wanted
    if len(data) == 1:
        (param, value), = data.items()
        values = _ids(value) if not isinstance(value, (set, frozenset)) else None
        if isinstance(value, (torch.Tensor, np.ndarray)) and values is None and value.ndim == 1:
            values = value.tolist()
        if values is None or len(values) < 2 or any(v not in (0, 1) or type(v) is str for v in values) \
                or not any(values):
            return None
        return [int(v) for v in values], int(sum(values)), param, k, None
    return None


def _perfect(value: Any, hits: list[int], relevant_ids: list | None) -> Any:
    """The call's ranked list with its relevant items first (the ids form) or its 0/1 relevances sorted, in
    the list's own container."""
    from overt.guards.metricrefs import like

    if relevant_ids is None:
        return like(sorted(hits, reverse=True), value)
    order = _ids(value) or []
    wanted = set(relevant_ids)
    front = [v for v in order if v in wanted] + [v for v in dict.fromkeys(relevant_ids) if v not in set(order)]
    made = (front + [v for v in order if v not in wanted])[:len(order)]
    if isinstance(value, (list, tuple)):
        return type(value)(made)
    return like(made, value)


def _expected(metric: str, hits: list[int], relevant: int, k: int | None) -> tuple[list[float], dict[str, float]]:
    """The values the metric takes on ``hits`` under its accepted conventions, and the other metrics' values."""
    cut = len(hits) if k is None else k
    top = hits[:cut]
    first = next((i + 1 for i, h in enumerate(hits) if h), None)
    first_k = next((i + 1 for i, h in enumerate(top) if h), None)
    numbers = {
        "recall@k": [sum(top) / relevant],
        "precision@k": [sum(top) / cut, sum(top) / len(top)],
        "hit@k": [float(sum(top) > 0)],
        "mrr": [1 / first if first else 0.0, 1 / first_k if first_k else 0.0],
    }
    others = {"recall@k": numbers["precision@k"][0], "precision@k": numbers["recall@k"][0],
              "hit@k": float(sum(top)), "mrr": 1 / (first - 1) if first and first > 1 else -1.0}
    return numbers[metric], others


def _same(value: float, number: float) -> bool:
    return any(abs(value - number * scale) <= 1e-6 + 1e-4 * abs(number * scale) for scale in (1, 100))


def _ranking(fn: Any, metric: str, name: str, given: dict[str, Any], bound: dict[str, Any],
             result: Any) -> tuple[str, str] | None:
    from overt.guards.metricdef import _quiet

    found = _hits_list(given, bound)
    value = _number(result)
    if found is None or value is None:
        return None
    hits, relevant, param, k, relevant_ids = found
    lists = [("the ranked list of its call", hits, value)]
    if fn is not None:
        variant = _perfect(given[param], hits, relevant_ids)
        again = _hits_list({**given, param: variant}, {**bound, param: variant})
        try:
            other = _number(_quiet(fn, **{**bound, param: variant}))
        except Exception:  # noqa: BLE001  the user's function on other values: no premise
            other = None
        if again is not None and other is not None:
            lists.append(("the same list with its relevant items ranked first", again[0], other))
    for what, ranked, got in lists:
        accepted, others = _expected(metric, ranked, relevant, k)
        if any(_same(got, a) for a in accepted):
            continue
        cut = len(ranked) if k is None else k
        top = ranked[:cut]
        label = {"recall@k": f"recall@{cut}", "precision@k": f"precision@{cut}", "hit@k": f"hit@{cut}",
                 "mrr": "MRR"}[metric]
        also = {"recall@k": f"precision@{cut} (hits in the top {cut} over {cut}, not over the {relevant} relevant "
                            "items)",
                "precision@k": f"recall@{cut} (hits over the {relevant} relevant items, not over {cut})",
                "hit@k": f"the number of hits in the top {cut}",
                "mrr": "the reciprocal rank counted from 0"}[metric]
        cause = f"it is {also}" if _same(got, others[metric]) else \
            "it matches no convention of the metric (as a fraction or in percent)"
        definition = {"recall@k": "the relevant items in the top k over all relevant items",
                      "precision@k": "the relevant items in the top k over k",
                      "hit@k": "1 when any relevant item is in the top k, else 0",
                      "mrr": "1 over the rank (from 1) of the first relevant item, 0 when there is none"}[metric]
        return (f"{name}() gives {got:.4g} on {what} ({param!r}: {sum(top)} of the {relevant} relevant items in the "
                f"top {cut}), where its {label} is {accepted[0]:.4g}: {cause}.",
                f"compute {label} as {definition}, or use a maintained implementation (torchmetrics.retrieval, "
                "ranx, pytrec_eval)")
    return None


def _array(x: Any) -> np.ndarray | None:
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool or x.is_complex():
            return None
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray) and x.dtype.kind in "iuf":
        return x
    return None


Images = tuple[np.ndarray, np.ndarray, str, str]


def _images(given: dict[str, Any], bound: dict[str, Any], peak: bool) -> Images | None:
    extra = {p: v for p, v in bound.items() if p not in given or _array(v) is None}
    data = {p: v for p, v in given.items() if p not in extra}
    if len(data) != 2:
        return None
    for p, v in extra.items():
        if p in given and not (peak and p.lower() in PEAK and isinstance(v, (int, float))):
            return None
        if p not in given and v is not None and not (peak and p.lower() in PEAK):
            return None
    (pa, a), (pb, b) = data.items()
    xa, xb = _array(a), _array(b)
    if xa is None or xb is None or xa.shape != xb.shape or xa.size < 2:
        return None
    return xa, xb, pa, pb


def _psnr(name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    found = _images(given, bound, peak=True)
    value = _number(result)
    if found is None or value is None:
        return None
    xa, xb, pa, pb = found
    fa, fb = xa.astype(np.float64), xb.astype(np.float64)
    squared = (fa - fb) ** 2
    span = min(float(fa.max() - fa.min()), float(fb.max() - fb.min()))
    mse = float(squared.mean())
    if span <= 0 or mse <= 1e-6 * span ** 2:
        return None
    peaks = [math.sqrt(mse * 10 ** (value / 10))]
    if fa.ndim > 1:
        per = squared.reshape(len(fa), -1).mean(1)
        if (per > 0).all():  # PSNR averaged over the images: 10 log10(peak^2) - mean(10 log10 mse_i)
            peaks.append(math.sqrt(10 ** ((value + float(np.mean(10 * np.log10(per)))) / 10)))
    if max(peaks) >= 0.9 * span:
        return None
    wraps = ""
    if xa.dtype.kind in "iu" and xb.dtype.kind in "iu":
        wraps = (f" The inputs are {xa.dtype} arrays: a difference computed in that dtype wraps around below "
                 "zero, which is the usual cause of such a value.")
    return (f"{name}() gives {value:.4g} dB on the images of its call ({pa!r}, {pb!r}), which implies a peak value "
            f"of {max(peaks):.4g}, while their values span {span:.4g} (max - min): PSNR's peak is the largest value "
            "the data can take above its smallest (1 on [0, 1] images, 255 on 8-bit ones), never less than the "
            "range the images actually span: the images were rescaled (standardised, or mapped to [-1, 1]) "
            "without rescaling the peak (or the squared error is summed, not averaged), and every reconstruction "
            f"reads worse than it is.{wraps}",
            f"pass the peak of the data's own range to {name}() (for standardised images (max - min) / std of the "
            "original scale, e.g. 1 / std for [0, 1] data), or undo the normalisation first")


def _wrapped(xa: np.ndarray, xb: np.ndarray, metric: str) -> list[float]:
    d = xa - xb  # in the inputs' own integer dtype, as the user's code computed it
    values = []
    for sq in (d * d, (d ** 2).astype(np.float64)):
        mse = float(np.mean(sq))
        values.append({"mae": float(np.mean(np.sqrt(sq.astype(np.float64)))), "mse": mse,
                       "rmse": math.sqrt(mse)}[metric])
    values.append({"mae": float(np.mean(d)), "mse": float(np.mean(d.astype(np.float64) ** 2)),
                   "rmse": math.sqrt(float(np.mean(d.astype(np.float64) ** 2)))}[metric])
    return values


def _error(metric: str, name: str, given: dict[str, Any], bound: dict[str, Any],
           result: Any) -> tuple[str, str] | None:
    found = _images(given, bound, peak=False)
    value = _number(result)
    if found is None or value is None:
        return None
    xa, xb, pa, pb = found
    if xa.dtype != xb.dtype or xa.dtype.kind not in "iu" or np.iinfo(xa.dtype).bits > 32:
        return None
    d = xa.astype(np.float64) - xb.astype(np.float64)
    right = {"mae": float(np.abs(d).mean()), "mse": float((d ** 2).mean()), "rmse": math.sqrt(float((d ** 2).mean()))}
    ok = [right[metric]]
    if d.ndim > 1 and metric == "rmse":
        ok.append(float(np.sqrt((d ** 2).reshape(len(d), -1).mean(1)).mean()))
    if any(abs(value - v) <= 1e-6 + 1e-4 * abs(v) for v in ok):
        return None
    if not any(abs(value - v) <= 1e-6 + 1e-4 * abs(v) for v in _wrapped(xa, xb, metric)):
        return None  # another quantity, but not proved to be the wrapped one: silent
    label = metric.upper()
    return (f"{name}() gives {value:.4g} on the {xa.dtype} arrays of its call ({pa!r}, {pb!r}), where their {label} is "
            f"{right[metric]:.4g}: it is the same error computed in {xa.dtype} arithmetic, where a difference below "
            f"zero wraps around (1 - 2 = {np.iinfo(xa.dtype).max if xa.dtype.kind == 'u' else 'an overflow'}) and "
            "a square overflows, so the error is dominated by the wrap-around, not by the model.",
            f"convert both arrays to floating point before subtracting in {name}() (a.astype(np.float64) - "
            "b.astype(np.float64), or tensor.float())")


def check(fn: Any, metric: str, name: str, given: dict[str, Any], bound: dict[str, Any],
          result: Any) -> tuple[str, str] | None:
    """(message, fix) when a ranking or reconstruction metric's value is no convention of its definition."""
    if metric in ("recall@k", "precision@k", "hit@k", "mrr"):
        return _ranking(fn, metric, name, given, bound, result)
    if metric == "psnr":
        return _psnr(name, given, bound, result)
    if metric in ("mae", "mse", "rmse"):
        return _error(metric, name, given, bound, result)
    return None
