"""A decoding filter named top-k (or top-p) keeps the largest scores of each row (slug ``metric-off-definition``;
issue 33, session 46).

The premise, true of every correct top-k filter (``top_k_filter``, ``top_k_logits``, ``filter_top_k`` ...):
on a row of scores whose k-th and (k+1)-th largest values differ, it keeps exactly ``min(k, n)`` entries,
the largest ones, unchanged, and sets every other entry to one fill value below all kept ones (``-inf``, a
large negative number, 0 for probabilities).  A filter that keeps ``k + 1`` (a ``>`` for ``>=`` on 0-based
ranks), ``k - 1``, or the smallest entries, samples from another distribution than the one its caller asked
for: ``top_k=1`` is then no greedy decoding.

A nucleus (top-p) filter (``top_p_filter``, ``nucleus_filtering`` ...; not one named for both top-k and
top-p) keeps the most probable tokens, in order, up to the first whose cumulative probability reaches ``p``:
with that token (Hugging Face's shifted mask) or without it (``cumsum <= p``, at least one token kept), both
accepted.  Its kept set must be a prefix of the row sorted by probability (a mask computed in sorted order and
applied to the unsorted row without scattering it back breaks this) of one of those two sizes.  The scores are
read as probabilities when each row is non-negative and sums to 1, else as logits (softmax); rows tied near
the boundary, or whose cumulative mass lands on ``p`` within rounding, are not judged.

The check calls the user's function once more at the end of the run, quietly, on a copy of the scores its
first call was given (so that a filter working in place is judged on its own input) with the call's ``k``.
Silent when the premise cannot be proven: a name that also claims a nucleus (top-p) or another rule, a call
that passes arguments beyond the scores, ``k`` and a fill value, scores that are not one finite float
tensor, an output of another shape, kept entries that differ from their input (a temperature, a
renormalisation), removed entries that are not one value below the kept ones, ``k < 1``, rows tied at the
boundary.  Reported when at least half the judged rows keep another number of entries, or other entries,
than the ``k`` largest.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

#: name words of a top-k filter (with "top" and "k", or "topk")
_FILTER = frozenset({"filter", "filtering", "logits", "keep", "truncate", "truncation", "warp", "warper", "mask"})
#: name words that make a top-k name something else (nucleus filtering, a ranking metric, sampling itself)
_NOT = frozenset({"p", "topp", "nucleus", "typical", "min", "accuracy", "acc", "recall", "precision", "hit", "hits",
                  "ndcg", "mrr", "loss", "indices", "index", "ids"})
#: parameter names of the cut-off, and of a fill value
_K = frozenset({"k", "top_k", "topk", "top", "num", "n"})
_FILL = frozenset({"filter_value", "fill_value", "value", "fill", "neg_inf", "min_value"})


#: name words that make a nucleus name something else (top-k as well, a metric)
_NOT_P = (_NOT - {"p", "topp", "nucleus"}) | {"k", "topk"}
#: parameter names of a nucleus filter's mass
_P = frozenset({"p", "top_p", "topp", "nucleus", "mass"})


def definition_of(words: set[str]) -> str | None:
    """"topk-filter" / "topp-filter" when a function named with ``words`` claims to be a top-k / nucleus
    (top-p) filter, else None."""
    if not words & _FILTER:
        return None
    if ("topk" in words or {"top", "k"} <= words) and not words & _NOT:
        return "topk-filter"
    if ("topp" in words or "nucleus" in words or {"top", "p"} <= words) and not words & _NOT_P:
        return "topp-filter"
    return None


def _quiet_call(fn: Callable, args: dict[str, Any]) -> Any:
    from overt.guards.metricdef import _quiet

    return _quiet(fn, **args)


def _kept(fn: Callable, given: dict[str, Any], bound: dict[str, Any], names: frozenset[str], kind: type) \
        -> tuple[str, str, Any, torch.Tensor, torch.Tensor] | None:
    """(scores param, cut-off param, cut-off, the call's rows, which entries the filter keeps) of the function
    called again on a copy of its call's scores, when what it does is a truncation: kept entries unchanged, the
    others one fill value below them; else None."""
    scores = [p for p, v in given.items() if isinstance(v, torch.Tensor)]
    cuts = [p for p, v in given.items() if p.lower() in names and type(v) is kind]
    if not cuts:
        cuts = [p for p, v in bound.items() if p.lower() in names and type(v) is kind and p not in given]
    if len(scores) != 1 or len(cuts) != 1:
        return None
    param, cparam = scores[0], cuts[0]
    if any(p not in (param, cparam) and p.lower() not in _FILL for p in given):
        return None  # a further argument: a switch we do not know
    x = given[param]
    if not x.is_floating_point() or x.ndim < 1 or x.shape[-1] < 2 or x.numel() == 0 \
            or not bool(torch.isfinite(x).all()):
        return None
    original = x.detach().clone()
    args = dict(bound)
    args[param] = original.clone()
    try:
        out = _quiet_call(fn, args)
    except Exception:  # noqa: BLE001  the user's function on a copy: no premise
        return None
    if not isinstance(out, torch.Tensor) or out.shape != original.shape or not out.is_floating_point():
        return None
    rows = original.reshape(-1, original.shape[-1]).to("cpu", torch.float64)
    got = out.detach().reshape(-1, original.shape[-1]).to("cpu", torch.float64)
    kept = got == rows
    removed = ~kept
    if not bool(kept.any(1).all()):
        return None
    if bool(removed.any()):
        fills = got[removed]
        if not bool((fills == fills[0]).all()):
            return None  # removed entries are not one fill value: another transform
        low = torch.where(kept, rows, torch.full_like(rows, float("inf"))).min(1).values
        if not bool((fills[0] < low).all()):
            return None
    return param, cparam, bound[cparam], rows, kept


def check(fn: Callable, name: str, given: dict[str, Any], bound: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fix) when the filter keeps another set than the k largest of its call's rows."""
    found = _kept(fn, given, bound, _K, int)
    if found is None or found[2] < 1:
        return None
    param, kparam, k, rows, kept = found
    n = rows.shape[1]
    want = min(k, n)
    ordered = rows.sort(1, descending=True).values
    judged = torch.ones(rows.shape[0], dtype=torch.bool) if want == n else ordered[:, want - 1] != ordered[:, want]
    if not bool(judged.any()):
        return None
    counts = kept.sum(1)
    threshold = ordered[:, want - 1:want]
    wrong_set = (kept & (rows < threshold)).any(1)
    wrong = judged & ((counts != want) | wrong_set)
    if int(wrong.sum()) * 2 < int(judged.sum()):
        return None
    rows_judged = int(judged.sum())
    typical = int(counts[wrong].mode().values) if bool(wrong.any()) else want
    what = (f"keeps {typical} entries" if typical != want else "keeps entries that are not the largest")
    return (f"{name}() {what} of {n} in {int(wrong.sum())} of the {rows_judged} rows of its call's scores "
            f"({param!r}) with {kparam}={k}: a top-k filter keeps exactly the {want} largest scores of each row "
            f"(rows whose {want} largest are not tied with the next one) and removes the rest, so sampling after it "
            f"draws from another set of tokens than {kparam}={k} asks for (with k = 1 the decoding is no longer "
            "greedy).",
            f"remove the entries whose 0-based rank is >= k (or below torch.topk(scores, k).values[..., -1:]), "
            f"e.g. scores.masked_fill(scores < torch.topk(scores, k).values[..., -1:], float('-inf')); test "
            f"{name}() with k=1 on one row: exactly one finite entry must remain")


def check_nucleus(fn: Callable, name: str, given: dict[str, Any], bound: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fix) when a nucleus filter keeps another set than the smallest set of largest probabilities whose
    mass reaches p (that set, or it without the token that crosses p: both conventions are in use)."""
    found = _kept(fn, given, bound, _P, float)
    if found is None or not 0.0 < found[2] < 1.0:
        return None
    param, pparam, p, rows, kept = found
    probs = rows if bool((rows >= 0).all()) and bool(((rows.sum(1) - 1).abs() < 1e-4).all()) else rows.softmax(1)
    ordered = probs.sort(1, descending=True).values
    mass = ordered.cumsum(1)
    n = rows.shape[1]
    m = ((mass < p - 1e-9).sum(1) + 1).clamp(max=n)  # the smallest count whose mass reaches p
    counts = kept.sum(1)
    index = torch.arange(n)
    near = (index[None, :] >= (m - 2).clamp(min=0)[:, None]) & (index[None, :] <= m[:, None].clamp(max=n - 1))
    gaps = (ordered[:, 1:] == ordered[:, :-1])
    tied = (near[:, 1:] & gaps).any(1)
    close = ((mass - p).abs() < 1e-6).any(1)  # a mass on p itself: the conventions differ by rounding
    judged = ~tied & ~close
    if not bool(judged.any()):
        return None
    smallest_kept = torch.where(kept, probs, torch.full_like(probs, float("inf"))).min(1, keepdim=True).values
    not_prefix = (~kept & (probs > smallest_kept)).any(1)
    ok_count = (counts == m) | (counts == (m - 1).clamp(min=1))
    wrong = judged & (not_prefix | ~ok_count)
    if int(wrong.sum()) * 2 < int(judged.sum()):
        return None
    i = int(wrong.nonzero()[0])
    what = ("keeps tokens less probable than some it removes" if bool(not_prefix[i]) else
            f"keeps {int(counts[i])} tokens where the smallest set of most probable tokens reaching p holds "
            f"{int(m[i])}")
    return (f"{name}() on the scores of its call ({param!r}) with {pparam}={p:g} {what} (row {i}; {int(wrong.sum())} "
            f"of {int(judged.sum())} rows judged are wrong): a nucleus filter keeps the most probable tokens up to the "
            "first whose cumulative probability reaches p (with or without that token), so sampling after it draws "
            "from another set than the one p asks for.",
            f"sort the probabilities in descending order, keep tokens while the mass before them is below p, and map "
            f"the removal back through the sort's indices (scatter), one row at a time; test {name}() on one row "
            "whose probabilities you know")
