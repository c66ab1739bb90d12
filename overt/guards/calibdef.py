"""An expected calibration error recomputed by its definition (slug ``metric-off-definition``; issue 33, session
50).

The ECE of a classifier sorts its predictions into confidence bins and sums, over the bins, each bin's gap
between accuracy and mean confidence weighted by the share of the predictions that fall in it.  A function named
for it (``ece``, ``expected_calibration_error``, ``calibration_error``) is checked on the values of its own first
call; accepted conventions: equal-width bins over [0, 1] (either edge closed) or equal-mass bins, any number of
bins from 1 to 100 unless the call passes it (``n_bins``, ``bins``, ``num_bins``), top-label confidence from a
matrix of probabilities (or of logits, through a softmax) with integer labels, or a confidence series with 0/1
correctness (which is also the positive-class convention of a binary probability with 0/1 labels), and for a
binary probability series also the top-label convention (confidence ``max(p, 1 - p)``), as a fraction or in
percent.  A value farther than ``MARGIN`` (absolute) and 10% from every one of them is reported: the commonest
cause is bins averaged without their counts (ethen8181/machine-learning#20), which gives a handful of predictions
in a sparse bin the weight of thousands in the top bin.

Silent when the call does not have the definition's form: other arguments than the two series and the bin
count, fewer than 50 predictions, series of different lengths, values outside [0, 1] where a confidence is
read, labels that are not integers, a result that is not one number, names of other calibration measures
(maximum, adaptive, class-wise, static, smoothed, KDE-based ECE; reliability diagrams).
"""

from __future__ import annotations

from typing import Any

import torch

from overt.guards import scoredefs

#: name words of other calibration measures or of things that are no ECE value
_NOT_ECE = frozenset({"mce", "max", "maximum", "ace", "adaptive", "sce", "static", "classwise", "class", "kde",
                      "smooth", "smoothed", "debiased", "loss", "plot", "diagram", "reliability", "temperature",
                      "draw", "show", "print", "log", "bins", "bin", "per", "tace", "marginal", "l2", "squared"})
#: parameter names of a bin count
_BINS = frozenset({"n_bins", "bins", "num_bins", "nbins", "n_bin", "num_bin", "bin_count", "n", "m"})
MIN_ITEMS, MAX_ITEMS, MARGIN = 50, 200_000, 0.01


def definition_of(words: set[str] | frozenset[str]) -> str | None:
    """"ece" for a function named after the expected calibration error, else None."""
    if words & _NOT_ECE:
        return None
    if "ece" in words or {"expected", "calibration"} <= words or {"calibration", "error"} <= words:
        return "ece"
    return None


def _ece(conf: torch.Tensor, correct: torch.Tensor, bins: int, mode: str) -> float:
    n = conf.numel()
    if mode == "mass":
        order = conf.argsort()
        groups = torch.tensor_split(order, bins)
        total = sum(float((correct[g].sum() - conf[g].sum()).abs()) for g in groups if g.numel())
        return total / n
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    inner = edges[1:-1]
    index = torch.bucketize(conf, inner, right=(mode == "left"))  # "left": [lo, hi); "right": (lo, hi]
    diff = torch.zeros(bins, dtype=torch.float64).index_add_(0, index, correct - conf)
    return float(diff.abs().sum()) / n


def _readings(given: dict[str, Any]) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """(confidence, correctness) series the two non-bin arguments can be read as under the conventions."""
    series = [(k, v) for k, v in given.items() if k.lower() not in _BINS]
    if len(series) != 2:
        return None
    a, b = (scoredefs._array(v) for _, v in series)
    if a is None or b is None:
        return None
    out: list[tuple[torch.Tensor, torch.Tensor]] = []
    for x, y in ((a, b), (b, a)):
        if x.ndim == 2 and y.ndim == 1 and x.shape[0] == y.shape[0] and x.shape[1] >= 2:
            if not bool((y == y.round()).all()) or bool((y < 0).any()) or bool((y >= x.shape[1]).any()):
                continue
            probs = x
            if bool((x < 0).any()) or bool((x > 1).any()) or not bool(((x.sum(1) - 1).abs() < 1e-3).all()):
                probs = torch.softmax(x, 1)
            conf, pred = probs.max(1)
            out.append((conf, (pred == y.long()).to(torch.float64)))
        elif x.ndim == 1 and y.ndim == 1 and x.numel() == y.numel():
            if bool((x < 0).any()) or bool((x > 1).any()) or not bool(((y == 0) | (y == 1)).all()):
                continue
            out.append((x, y))
            out.append((torch.maximum(x, 1 - x), ((x > 0.5).to(torch.float64) == y).to(torch.float64)))
    return out or None


def check(name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    """(message, fix) when ``name()``'s value is no ECE of its call's predictions; None otherwise."""
    value = scoredefs._number(result)
    if value is None:
        return None
    readings = _readings(given)
    if readings is None or not MIN_ITEMS <= readings[0][0].numel() <= MAX_ITEMS:
        return None
    counts = [v for k, v in bound.items() if k.lower() in _BINS and isinstance(v, int) and not isinstance(v, bool)]
    if len(counts) > 1 or (counts and not 1 <= counts[0] <= 1000):
        return None
    choices = counts or list(range(1, 101))
    nearest, shown = None, None
    for conf, correct in readings:
        for bins in choices:
            for mode in ("right", "left", "mass"):
                ece = _ece(conf, correct, bins, mode)
                for scale in (1.0, 100.0):
                    gap = abs(value - scale * ece)
                    if gap <= max(MARGIN * scale, 0.1 * scale * ece):
                        return None
                    if scale == 1.0 and (nearest is None or gap < nearest):
                        nearest, shown = gap, (ece, bins, mode)
    if shown is None:
        return None
    ece, bins, mode = shown
    width = "equal-mass" if mode == "mass" else "equal-width"
    return (f"{name}() returns {value:.4f} on the predictions of its call ({', '.join(repr(k) for k in given)}), "
            f"but no expected calibration error of them is near it: the closest convention ({bins} {width} bins, "
            f"each bin's gap between accuracy and confidence weighted by its share of the predictions) gives "
            f"{ece:.4f}, and none of 1-100 equal-width or equal-mass bins, either edge closed, as a fraction or in "
            "percent, comes within 10%: a bin average without the bins' counts (a sparse bin weighing as much as "
            "the full top bin) is the usual cause, and the number reported is not the model's calibration error.",
            f"weight each bin's gap by its share of the predictions (ece += gap * in_bin.float().mean()), or use "
            f"torchmetrics.CalibrationError; test {name}() on predictions whose ECE you know")
