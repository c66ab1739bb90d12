"""Scores and losses of forecasting and survival evaluation recomputed by their definitions (slug
``metric-off-definition``; issue 33, session 48).

Two quantities whose definitions fix every number a correct implementation can return, checked on the values
of the function's own first call:

- a **quantile (pinball) loss** at level ``q`` is ``max(q * e, (q - 1) * e)`` of the signed error ``e``: an
  under-forecast costs ``q`` per unit, an over-forecast ``1 - q``.  That asymmetry is the whole point of the
  loss (its minimiser is the q-quantile); accepted conventions: ``e = target - prediction`` or the reverse
  (which reads the level as ``1 - q``), the mean, the sum, the sum over a vector of levels then the mean, the
  unreduced per-element loss, and each times 2 (so that ``q = 0.5`` gives the absolute error).
- a **concordance index** (Harrell's C) counts the comparable pairs -- a subject with an observed event
  before another subject's time -- whose predictions are ordered like the times, a tie of predictions half.
  Accepted conventions: a pair tied in time between an event and a censored subject comparable (the censored
  subject outlived the event) or not, tied times counted in both directions, predictions that are risks (high
  means early) or survival times (high means late), tied predictions credited a half, nothing, or left out.
  No convention credits a pair by anything but its predictions.

Silent when the call does not have the definition's form: other arguments than the two series and the level
(a Huber threshold, weights, a reduction flag), levels outside (0, 1), a vector of levels with a target of
that width (a pairwise quantile-regression loss), a C-index whose series are not three equal-length 1-D
series of one event indicator, more than 2,000 subjects, no comparable pair, a value that is not one number.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

#: name words of losses related to the pinball loss but not equal to it (smoothed, weighted, normalised by the
#: target's scale as DeepAR's rho-risk, interval scores, conformal quantiles)
_NOT_PINBALL = frozenset({"smooth", "huber", "cosh", "logcosh", "expectile", "crps", "interval", "coverage",
                          "weighted", "calibration", "conformal", "crossing", "normalized", "normalised", "scaled",
                          "relative", "rho", "nql", "wql"})
#: name words of concordance measures other than Harrell's C (Uno's IPCW C, time-dependent C, Lin's concordance
#: correlation)
_NOT_HARRELL = frozenset({"uno", "ipcw", "td", "antolini", "weighted", "time", "dependent", "cumulative",
                          "dynamic", "truncated", "gonen", "correlation", "coefficient", "ccc", "cc", "lin"})
#: parameter names of a quantile level
_LEVEL = frozenset({"q", "qs", "quantile", "quantiles", "tau", "taus", "alpha", "level", "levels",
                    "quantile_level", "quantile_levels"})
_EVENT = ("event", "status", "observed", "death", "dead", "died", "delta", "indicator", "censor")
_TIME = ("time", "duration", "surv", "follow")
_SCORE = ("risk", "pred", "score", "hazard", "estimate", "output", "logit", "marker")
MAX_SUBJECTS = 2000
#: how far a value must be from every convention to be reported (absolute; relative for the loss)
C_MARGIN, LOSS_RELATIVE = 1e-3, 1e-3


def definition_of(words: set[str] | frozenset[str]) -> str | None:
    """"pinball" or "c-index" for a function named with ``words``, else None."""
    if not words & _NOT_PINBALL and ("pinball" in words or ("quantile" in words and words & {"loss", "score",
                                                                                                 "risk", "error"})):
        return "pinball"
    if words & _NOT_HARRELL:
        return None
    if "cindex" in words or {"c", "index"} <= words or {"concordance", "index"} <= words \
            or ("harrell" in words and words & {"c", "concordance"}):
        return "c-index"
    return None


def _array(x: Any) -> torch.Tensor | None:
    """``x`` as a float64 tensor when it holds finite numbers (a tensor, an array, a list of numbers)."""
    try:
        if isinstance(x, torch.Tensor):
            out = x.detach().to("cpu", torch.float64)
        elif isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
            out = torch.as_tensor(x.astype(np.float64))
        elif isinstance(x, (list, tuple)) and x and all(isinstance(v, (int, float, bool, np.number)) for v in x):
            out = torch.tensor([float(v) for v in x], dtype=torch.float64)
        else:
            return None
    except (TypeError, ValueError, RuntimeError):
        return None
    return out if out.numel() and bool(torch.isfinite(out).all()) else None


def _number(x: Any) -> float | None:
    values = _array(x) if not isinstance(x, (int, float)) or isinstance(x, bool) else torch.tensor([float(x)])
    return float(values) if values is not None and values.numel() == 1 else None


def _close(a: torch.Tensor, b: torch.Tensor, relative: float) -> bool:
    return a.shape == b.shape and bool(((a - b).abs() <= relative * b.abs() + 1e-7).all())


# ---------------------------------------------------------------------------------------------- pinball


def _level(given: dict[str, Any]) -> tuple[str, torch.Tensor] | None:
    """(parameter, levels) of the call's quantile level: a parameter named like one, else the only number."""
    named = [p for p in given if p.lower() in _LEVEL]
    numbers = [p for p, v in given.items() if isinstance(v, float)]
    pick = named if len(named) == 1 else numbers if len(numbers) == 1 and not named else []
    if len(pick) != 1:
        return None
    levels = _array(given[pick[0]]) if not isinstance(given[pick[0]], float) else torch.tensor([given[pick[0]]],
                                                                                              dtype=torch.float64)
    if levels is None or levels.ndim > 1 or not bool(((levels > 0) & (levels < 1)).all()):
        return None
    return pick[0], levels.reshape(-1)


def _series(a: torch.Tensor, b: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool] | None:
    """(prediction-like, target-like, vector of levels) in shapes the loss combines elementwise, else None."""
    if q.numel() == 1:
        if a.numel() != b.numel() or [d for d in a.shape if d != 1] != [d for d in b.shape if d != 1]:
            return None
        return a.reshape(-1), b.reshape(-1), False
    width = q.numel()
    wide = [t for t in (a, b) if t.ndim == 2 and t.shape[1] == width]
    if len(wide) != 1:
        return None  # both of the levels' width: a pairwise quantile-regression loss, not this definition
    pred = wide[0]
    target = b if pred is a else a
    if target.shape not in ((pred.shape[0],), (pred.shape[0], 1)):
        return None
    return pred, target.reshape(-1, 1).expand_as(pred), True


def _pinball(name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    if len(bound) != 3:
        return None  # further parameters (a threshold, weights, a reduction): another loss
    level = _level(bound)
    if level is None:
        return None
    param, q = level
    series = {p: _array(v) for p, v in bound.items() if p != param}
    if any(v is None or v.numel() < 2 for v in series.values()):
        return None
    (pa, a), (pb, b) = series.items()
    shaped = _series(a, b, q)
    if shaped is None:
        return None
    pred, target, vector = shaped
    value = _array(result)
    if value is None:
        return None
    level_of = q if vector else q[0]
    references = []
    for e in (target - pred, pred - target):
        loss = torch.maximum(level_of * e, (level_of - 1) * e)
        forms = [loss, loss.mean().reshape(()), loss.sum().reshape(())]
        if vector:
            forms.append(loss.sum(-1).mean().reshape(()))
        references += [f * s for f in forms for s in (1.0, 2.0)]
    shown = value.reshape(()) if value.numel() == 1 else value
    if any(_close(shown.reshape(r.shape) if shown.numel() == r.numel() else shown, r, LOSS_RELATIVE)
           for r in references):
        return None
    if shown.numel() != 1:
        return None  # another shape than any reduction: nothing to compare
    got = float(shown)
    expected = float(torch.maximum(level_of * (target - pred), (level_of - 1) * (target - pred)).mean())
    absolute = (level_of * (target - pred).abs())
    one_sided = [absolute.mean(), absolute.sum(), ((1 - level_of) * (target - pred).abs()).mean(),
                 (torch.maximum(level_of, 1 - level_of) * (target - pred).abs()).mean()]
    at = f"q = {float(q[0]):g}" if not vector else f"the {q.numel()} levels of {param!r}"
    if any(abs(got - float(r)) <= LOSS_RELATIVE * abs(float(r)) + 1e-7 for r in one_sided):
        cause = (f"it is the loss of the absolute error |e|: max(q * |e|, (q - 1) * |e|) is always q * |e|, so an "
                 f"over-forecast costs as much as an under-forecast and the loss no longer depends on the side of "
                 f"the miss -- its minimiser is not the quantile it is named for")
        fix = (f"take the maximum over the signed error, e = target - prediction: torch.maximum(q * e, (q - 1) * e)"
               f".mean(); never abs() e before it in {name}()")
    else:
        cause = ("it matches no convention of the loss (max(q * e, (q - 1) * e) of the signed error, either "
                 "sign, as a mean, a sum or per element, times 1 or 2)")
        fix = (f"trace {name}() on one under-forecast and one over-forecast of 1 at q = 0.9 (losses 0.9 and 0.1), or "
               "use torchmetrics / a maintained pinball loss")
    return (f"{name}() gives {got:.4g} on the values of its call ({pa!r}, {pb!r}, {at}), where their pinball loss "
            f"is {expected:.4g}: {cause}.", fix)


# ---------------------------------------------------------------------------------------------- C-index


def _vector(x: Any) -> torch.Tensor | None:
    values = _array(x)
    if values is None:
        return None
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    return values if values.ndim == 1 else None


def _has(param: str, words: tuple[str, ...]) -> bool:
    low = param.lower()
    return any(w in low for w in words)


def _assignments(vectors: dict[str, torch.Tensor]) -> list[tuple[str, str, str, bool]] | None:
    """(time, prediction, event parameter, event inverted) assignments the names and values allow."""
    binary = [p for p, v in vectors.items() if bool(((v == 0) | (v == 1)).all())]
    named = [p for p in binary if _has(p, _EVENT)]
    events = named if len(named) == 1 else binary if len(binary) == 1 and not named else []
    if len(events) != 1:
        return None
    event = events[0]
    inverted = (False, True) if "censor" in event.lower() else (False,)
    rest = [p for p in vectors if p != event]
    times = [p for p in rest if _has(p, _TIME) and not _has(p, _SCORE)]
    scores = [p for p in rest if _has(p, _SCORE) and not _has(p, _TIME)]
    if len(times) == 1 and times != scores:
        pairs = [(times[0], next(p for p in rest if p != times[0]))]
    elif len(scores) == 1:
        pairs = [(next(p for p in rest if p != scores[0]), scores[0])]
    else:
        pairs = [(rest[0], rest[1]), (rest[1], rest[0])]
    return [(t, r, event, inv) for t, r in pairs for inv in inverted]


def _concordances(time: torch.Tensor, score: torch.Tensor, event: torch.Tensor) -> dict[str, float]:
    """Harrell's C of one assignment under every accepted convention, and the value of crediting an event
    tied in time with a censored subject a half whatever the predictions ("tie-half")."""
    n = len(time)
    e = event.bool()[:, None]
    earlier = time[:, None] < time[None, :]
    tied = (time[:, None] == time[None, :]) & ~torch.eye(n, dtype=torch.bool)
    censored_j = ~event.bool()[None, :]
    comparable = {"strict": e & earlier,
                  "censored-tie": e & (earlier | (tied & censored_j)),
                  "both-ways": e & (earlier | tied)}
    out: dict[str, float] = {}
    for direction, (hi, lo) in {"risk": (score[:, None] > score[None, :], score[:, None] < score[None, :]),
                                "time": (score[:, None] < score[None, :], score[:, None] > score[None, :])}.items():
        same = ~(hi | lo)
        for label, pairs in comparable.items():
            den = float(pairs.sum())
            if not den:
                continue
            conc, ties = float((pairs & hi).sum()), float((pairs & same).sum())
            out[f"{label}/{direction}/half"] = (conc + 0.5 * ties) / den
            out[f"{label}/{direction}/none"] = conc / den
            if den > ties:
                out[f"{label}/{direction}/dropped"] = conc / (den - ties)
        strict = comparable["strict"]
        special = e & tied & censored_j
        den = float((strict | special).sum())
        if den:
            out[f"tie-half/{direction}"] = (float((strict & hi).sum()) + 0.5 * float((strict & same).sum())
                                            + 0.5 * float(special.sum())) / den
    return out


def _c_index(name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    if len(bound) != 3 or len(given) != 3:
        return None
    vectors = {p: _vector(v) for p, v in bound.items()}
    if any(v is None for v in vectors.values()) or len({len(v) for v in vectors.values()}) != 1:
        return None
    n = len(next(iter(vectors.values())))
    if not 10 <= n <= MAX_SUBJECTS:
        return None
    got = _number(result)
    if got is None or not 0.0 <= got <= 1.0:
        return None
    assignments = _assignments(vectors)
    if not assignments:
        return None
    nearest, special, shown = None, None, None
    for time, score, event, inverted in assignments:
        indicator = 1 - vectors[event] if inverted else vectors[event]
        if not bool((indicator == 1).any()):
            return None
        values = _concordances(vectors[time], vectors[score], indicator)
        accepted = [v for k, v in values.items() if not k.startswith("tie-half")]
        if not accepted:
            return None
        gap = min(abs(got - v) for v in accepted)
        if gap <= C_MARGIN:
            return None  # a convention of Harrell's C
        if nearest is None or gap < nearest:
            nearest = gap
            plain = [v for k, v in values.items() if k.startswith("censored-tie/") and k.endswith("/half")]
            shown = (time, score, event, min(plain, key=lambda v: abs(got - v)) if plain else accepted[0])
            special = [k for k, v in values.items() if k.startswith("tie-half") and abs(got - v) <= 1e-6]
    if shown is None:
        return None
    time, score, event, expected = shown
    roles = f"times {time!r}, predictions {score!r}, events {event!r}"
    if special:
        cause = ("it credits half a pair to every event tied in time with a censored subject, whatever the two "
                 "predictions: the censored subject is known to outlive the event, so the pair is comparable and "
                 "its credit belongs to the predictions (1 when they are ordered like the times, 0 when not); "
                 "on coarse follow-up times such ties are common and pull the index towards 0.5")
        fix = (f"score an event tied with a censored time by the predictions like any comparable pair in {name}() "
               "(or leave such pairs out), or use lifelines.utils.concordance_index / sksurv's "
               "concordance_index_censored")
    else:
        cause = ("it matches no convention of Harrell's C (comparable pairs: an event before another subject's "
                 "time, with or without ties in time; predictions as risks or as times; tied predictions credited "
                 "0.5, 0 or left out)")
        fix = (f"trace {name}() on three subjects whose C you know, or use lifelines.utils.concordance_index / "
               "sksurv's concordance_index_censored")
    return (f"{name}() gives {got:.4g} on the {n} subjects of its call ({roles}), where Harrell's C is "
            f"{expected:.4g} and no accepted convention is within {nearest:.3g}: {cause}.", fix)


def check(fn: Callable, metric: str, name: str, given: dict[str, Any], bound: dict[str, Any],
          result: Any) -> tuple[str, str] | None:
    """(message, fix) when ``fn`` -- named after ``metric`` -- gives a value no convention of that definition
    gives on its call's arguments; None when it agrees or the premise does not hold."""
    if metric == "pinball":
        return _pinball(name, given, bound, result)
    if metric == "c-index":
        return _c_index(name, given, bound, result)
    return None
