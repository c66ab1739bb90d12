"""Rank correlations recomputed by their definitions (slug ``metric-off-definition``; issue 33, session 52).

A rank correlation is a function of the two series' rankings alone, and its definition says how a tie is
ranked:

- **Spearman's rho** is Pearson's correlation of the two series' ranks, each member of a tie given the mean
  of the ranks the tie spans (SciPy's ``spearmanr``, pandas' ``corr(method="spearman")``, torchmetrics'
  ``SpearmanCorrCoef``).  Accepted conventions: that value, and the textbook shortcut
  ``1 - 6 sum(d^2) / (n (n^2 - 1))`` on the same average ranks (equal to it without ties), as a fraction or
  in percent.
- **Kendall's tau** counts concordant and discordant pairs.  Accepted conventions: tau-a, tau-b (SciPy's
  default) and tau-c (Stuart's), as a fraction or in percent.

A function named for one of them (``spearman``, ``spearmans_rho``, ``spearman_corr``, ``srcc``, ``kendall_tau``)
is checked on the two series of its own first call; a value that none of its conventions gives is reported,
with the cause named when the value is recognisable: Pearson's correlation of the raw values (no ranking at
all), or ties given consecutive ranks in the order they are listed (argsort ranks used as they come).

Silent when the call does not have the definition's form: other arguments passed than the two series, a
parameter of the function that switches a tie or ranking method, series that are not one-dimensional or of
different lengths, fewer than ``MIN_ITEMS`` or more than ``MAX_ITEMS`` items, a series that is constant or not
finite, a result that is not one finite number; names of other measures (footrule, weighted, partial,
differentiable or soft rank correlations, losses).

A pure function of the call's values; the user's function is not called again.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from overt.guards import scoredefs

#: name words of measures that are not the plain rank correlation their other words name
_NOT = frozenset({"footrule", "weighted", "partial", "soft", "differentiable", "fast", "approx", "approximate",
                  "loss", "criterion", "objective", "distance", "plot", "print", "log", "save", "update", "reset",
                  "test", "pvalue", "p", "matrix", "pairwise", "batch", "batched", "per", "rolling"})
_SPEARMAN = frozenset({"spearman", "spearmans", "spearmanr", "srcc", "srocc", "sroc"})
_KENDALL = frozenset({"kendall", "kendalls", "kendalltau", "krcc", "krocc"})
#: parameter names that switch how ties or ranks are taken (a documented variant: not judged)
_SWITCHES = ("tie", "method", "rank", "variant", "weight", "nan", "alternative")
MIN_ITEMS, MAX_ITEMS, MAX_KENDALL = 10, 100_000, 2000  # Kendall: n x n sign matrices
#: how far a value may be from a convention and still be it (float32 arithmetic on a few thousand items)
MARGIN = 1e-3


def definition_of(words: set[str] | frozenset[str]) -> str | None:
    """"spearman" or "kendall" for a function named after one of these rank correlations, else None."""
    if words & _NOT:
        return None
    if words & _SPEARMAN:
        return "spearman"
    if words & _KENDALL:
        return "kendall"
    return None


def _series(x: Any) -> torch.Tensor | None:
    values = scoredefs._array(x)
    if values is None:
        return None
    if values.ndim > 1:
        if sum(d != 1 for d in values.shape) > 1:
            return None  # a matrix: per-row or per-column correlations, another reduction
        values = values.reshape(-1)
    return values if values.ndim == 1 else None


def average_ranks(x: torch.Tensor) -> torch.Tensor:
    """Ranks from 1, each member of a tie given the mean of the ranks the tie spans (SciPy's ``rankdata``)."""
    values, inverse, counts = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).to(torch.float64)
    return ((ends - counts.to(torch.float64) + 1 + ends) / 2)[inverse]


def listed_ranks(x: torch.Tensor, stable: bool = True) -> torch.Tensor:
    """Ranks from 1 in sorted order, a tie's members ranked consecutively in the order they are listed (or in
    the order torch's default sort leaves them, ``stable=False``)."""
    ranks = torch.empty_like(x)
    ranks[torch.argsort(x, stable=stable)] = torch.arange(1, x.numel() + 1, dtype=x.dtype)
    return ranks


def _listed_pairs(a: torch.Tensor, b: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Rankings of ``a`` and ``b`` with the ties of one or both ranked consecutively as listed."""
    out = []
    for stable in (True, False):
        la, lb = listed_ranks(a, stable), listed_ranks(b, stable)
        out += [(la, lb), (la, average_ranks(b)), (average_ranks(a), lb)]
    return out


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / (a.norm() * b.norm()))


def spearman_values(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    """Every accepted convention's Spearman rho of ``a`` and ``b`` (as a fraction)."""
    ra, rb = average_ranks(a), average_ranks(b)
    n = a.numel()
    shortcut = 1 - 6 * float(((ra - rb) ** 2).sum()) / (n * (n * n - 1))
    return [pearson(ra, rb), shortcut]


def kendall_values(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    """Kendall's tau-b (when defined), tau-a and tau-c of ``a`` and ``b``."""
    n = a.numel()
    sa = torch.sign(a[:, None] - a[None, :])
    sb = torch.sign(b[:, None] - b[None, :])
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    s = float((sa * sb)[upper].sum())  # concordant minus discordant pairs
    pairs = n * (n - 1) / 2
    untied_a, untied_b = float((sa != 0)[upper].sum()), float((sb != 0)[upper].sum())
    values = [s / math.sqrt(untied_a * untied_b)] if untied_a and untied_b else []
    values.append(s / pairs)
    m = min(torch.unique(a).numel(), torch.unique(b).numel())
    if m > 1:
        values.append(2 * m * s / (n * n * (m - 1)))
    return values


def _close(value: float, reference: float) -> bool:
    return any(abs(value - scale * reference) <= MARGIN * scale for scale in (1.0, 100.0))


def check(metric: str, name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    """(message, fix) when ``name()`` -- named for Spearman's rho or Kendall's tau -- returns a value no
    convention of it gives on its call's two series; None otherwise."""
    if len(given) != 2 or any(any(w in p.lower() for w in _SWITCHES) for p in bound if p not in given):
        return None
    value = scoredefs._number(result)
    if value is None or not math.isfinite(value):
        return None
    (pa, a), (pb, b) = ((p, _series(v)) for p, v in given.items())
    if a is None or b is None or a.numel() != b.numel() or not MIN_ITEMS <= a.numel() <= MAX_ITEMS:
        return None
    if metric == "kendall" and a.numel() > MAX_KENDALL:
        return None
    if bool((a == a[0]).all()) or bool((b == b[0]).all()):
        return None  # a constant series: the correlation is undefined
    references = spearman_values(a, b) if metric == "spearman" else kendall_values(a, b)
    if any(_close(value, r) for r in references):
        return None
    ties = a.numel() - torch.unique(a).numel() + b.numel() - torch.unique(b).numel()
    label = "Spearman's rho" if metric == "spearman" else "Kendall's tau"
    shown = f"{references[0]:.4f}" + ("" if metric == "spearman" else " (tau-b)")
    if metric == "spearman" and _close(value, pearson(a, b)):
        cause = ("it is Pearson's correlation of the raw values: nothing is ranked, so a few large values dominate "
                 "the sum and the number measures a linear fit, not an agreement of orderings")
        fix = (f"rank both series first (ties given their average rank) and take Pearson's correlation of the "
               f"ranks in {name}(), or call scipy.stats.spearmanr / torchmetrics' spearman_corrcoef")
    elif metric == "spearman" and ties and any(_close(value, pearson(x, y)) for x, y in _listed_pairs(a, b)):
        cause = (f"it ranks tied values consecutively in the order they are listed ({ties} values of the two "
                 "series tie with another) where Spearman's rho gives every member of a tie the mean of the ranks "
                 "it spans: the order of the tied items, which says nothing, decides part of the correlation")
        fix = (f"give each tie the average of its ranks in {name}() (scipy.stats.rankdata's default; in torch: "
               "the mean rank per torch.unique value), or call scipy.stats.spearmanr")
    else:
        ranked = "average ranks, Pearson's correlation of them or 1 - 6 sum(d^2) / (n (n^2 - 1))" \
            if metric == "spearman" else "tau-a, tau-b or tau-c"
        cause = f"it matches no convention of the definition ({ranked}, as a fraction or in percent)"
        tie_note = f"; the series hold {ties} tied values" if ties else ""
        cause += tie_note
        fix = (f"trace {name}() on a short series whose {label} you know (a series with itself: 1; reversed: -1), "
               f"or call scipy.stats.{'spearmanr' if metric == 'spearman' else 'kendalltau'}")
    return (f"{name}() gives {value:.4f} on the two series of its call ({pa!r}, {pb!r}; {a.numel()} items), "
            f"where their {label} is {shown}: {cause}.", fix)
