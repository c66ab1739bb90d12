"""A BLEU score recomputed by its definition on its own call's sentences (slug ``metric-off-definition``; issue 33,
session 55).

BLEU (Papineni et al. 2002) is the geometric mean of the clipped n-gram precisions of the candidates (each n-gram
counted at most as often as in the reference that holds it most often), times a brevity penalty
``exp(1 - r / c)`` when the candidates' length ``c`` is below the reference length ``r``, where each sentence
contributes the length of its reference *closest* to its candidate (the "best match length").  A function named
for it (``bleu``, ``bleu_score``, ``corpus_bleu``, ``compute_bleu``, ``bleu4`` ...) is checked on the values of its
own first call (or of its module-level call, :mod:`overt.guards.latecalls`, when it is defined after the last
evaluation).

Accepted conventions: corpus BLEU (counts summed over the sentences) or the mean of sentence BLEUs; as maximum
n-gram order the one the call passes, else the name's digit, else the parameter's default, else any of 1 to 4; the
closest reference length with ties broken to the shorter, the longer or the first listed one (NLTK; torchmetrics
and sacrebleu); no smoothing, add-one on the orders above 1 (Lin and Och; sacrebleu's ``add-k``), or a smoothing of
zero counts only (NLTK's ``method1``/``method3``, sacrebleu's ``floor``/``exp``: a mean of sentence BLEUs is then a
range, from 0 to its value with each zero-count precision taken as 1); tokens as given, or strings split on
whitespace, as written or lower-cased; as a fraction or in percent.  A value farther than 1% (and 0.001 of the
scale) from every one of them is reported.

Silent when the call does not have the definition's form: other arguments than the candidates, the references
and an n-gram order; sentences that are not strings, token lists or integer id lists; strings holding anything but
word characters and spaces (a tokeniser would split them in ways conventions differ on); an empty sentence; a
zero n-gram count at some order summed over the whole corpus (every smoothing convention then decides the
value); a result that is not one number; names of other measures
(self-BLEU, BLEU losses or rewards).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Sequence

from overt.guards import scoredefs

#: name words that make a BLEU something else: another measure, or no value of it
_NOT_BLEU = frozenset({"self", "loss", "reward", "plot", "print", "log", "save", "update", "reset", "diversity",
                       "show", "draw", "weights", "weight", "smooth", "smoothing", "nist", "chrf", "ter", "rouge"})
#: parameter names of the maximum n-gram order
_ORDER = frozenset({"n", "n_gram", "ngram", "n_grams", "ngrams", "max_n", "max_order", "order", "max_ngram",
                    "max_ngram_order", "n_gram_order", "ngram_order", "maxn"})
_WORD = re.compile(r"^\w+$")
MAX_SENTENCES, MAX_TOKENS, RELATIVE, ABSOLUTE = 20_000, 2_000_000, 0.01, 0.001
_SMOOTH = {"none": "no smoothing", "add1": "add-one smoothing above unigrams",
           "zeros": "a smoothing of zero counts only"}

Tokens = tuple  # one sentence: a tuple of hashable tokens


def definition_of(words: set[str] | frozenset[str]) -> str | None:
    """"bleu" for a function named after BLEU (``bleu``, ``bleu4``, ``corpus_bleu`` ...), else None."""
    if words & _NOT_BLEU:
        return None
    return "bleu" if any(re.fullmatch(r"bleu[1-4]?", w) for w in words) else None


def _named_order(name: str) -> int | None:
    found = re.search(r"bleu[_-]?([1-4])(?!\d)", name.lower())
    return int(found.group(1)) if found else None


def _sentence(x: Any) -> list[Tokens] | None:
    """The readings of ``x`` as one sentence (a string: split as written and lower-cased), else None."""
    if isinstance(x, str):
        words = x.split()
        if any(not _WORD.match(w) for w in words):
            return None
        lowered = tuple(w.lower() for w in words)
        return [tuple(words)] if lowered == tuple(words) else [tuple(words), lowered]
    if hasattr(x, "tolist") and hasattr(x, "shape") and len(getattr(x, "shape", ())) == 1:
        x = x.tolist()
    if isinstance(x, (list, tuple)) and all(type(v) is int for v in x):
        return [tuple(x)]
    if isinstance(x, (list, tuple)) and all(isinstance(v, str) for v in x):
        return [tuple(x)]
    return None


def _is_sentence(x: Any) -> bool:
    return _sentence(x) is not None and not (isinstance(x, (list, tuple)) and x and
                                             all(isinstance(v, str) and " " in v.strip() for v in x))


def _corpus(x: Any) -> list[Any] | None:
    """``x`` as a list of sentences (raw), else None."""
    if hasattr(x, "tolist") and hasattr(x, "shape") and len(getattr(x, "shape", ())) == 2:
        x = x.tolist()
    if isinstance(x, (list, tuple)) and x and not _is_sentence(x) and all(_is_sentence(s) for s in x):
        return list(x)
    return None


def _pairs(given: dict[str, Any]) -> list[tuple[list[Any], list[list[Any]]]] | None:
    """(candidates, references per candidate) readings of the call's two series (raw sentences)."""
    series = [v for k, v in given.items() if k.lower() not in _ORDER]
    if len(series) != 2:
        return None
    out: list[tuple[list[Any], list[list[Any]]]] = []
    for hyp, ref in (series, series[::-1]):
        if _is_sentence(hyp):  # one sentence against its references (or its one reference)
            if _is_sentence(ref):
                out.append(([hyp], [[ref]]))
            elif _corpus(ref) is not None:
                out.append(([hyp], [list(ref)]))
            continue
        hyps = _corpus(hyp)
        if hyps is None or not isinstance(ref, (list, tuple)):
            continue
        if _corpus(ref) is not None and len(ref) == len(hyps):
            out.append((hyps, [[r] for r in ref]))  # one reference per candidate
        groups = [_corpus(r) for r in ref]
        if all(g is not None for g in groups):
            if len(ref) == len(hyps):
                out.append((hyps, [list(g) for g in groups]))  # the references of each candidate
            if len({len(g) for g in groups}) == 1 and len(groups[0]) == len(hyps):
                out.append((hyps, [list(s) for s in zip(*groups)]))  # streams: the k-th reference of each
    return out or None


def _readings(hyps: list[Any], refs: list[list[Any]]) -> list[tuple[list[Tokens], list[list[Tokens]]]] | None:
    """Token readings (as written; lower-cased when strings differ by case) of a (candidates, references) pair."""
    hyp_forms = [_sentence(h) for h in hyps]
    ref_forms = [[_sentence(r) for r in group] for group in refs]
    if any(f is None for f in hyp_forms) or any(f is None for g in ref_forms for f in g):
        return None
    out = []
    for k in (0, 1):
        out.append(([f[min(k, len(f) - 1)] for f in hyp_forms],  # type: ignore[index]
                    [[f[min(k, len(f) - 1)] for f in g] for g in ref_forms]))  # type: ignore[index]
    return out if out[0] != out[1] else out[:1]


def _ngrams(tokens: Tokens, n: int) -> Counter:
    return Counter(tokens[i:i + n] for i in range(len(tokens) - n + 1))


def _stats(hyp: Tokens, refs: Sequence[Tokens], order: int) -> tuple[list[int], list[int], int, int, int, int]:
    """(clipped matches per order, candidate n-grams per order, length, closest reference lengths: shorter on a
    tie, longer on a tie, the first listed on a tie)."""
    matches, totals = [], []
    for n in range(1, order + 1):
        counts = _ngrams(hyp, n)
        most: Counter = Counter()
        for r in refs:
            most |= _ngrams(r, n)
        matches.append(sum((counts & most).values()))
        totals.append(max(len(hyp) - n + 1, 0))
    c = len(hyp)
    best = min(abs(len(r) - c) for r in refs)
    tied = [len(r) for r in refs if abs(len(r) - c) == best]
    return matches, totals, c, min(tied), max(tied), tied[0]


def _score(matches: list[int], totals: list[int], c: int, r: int, smooth: str) -> float:
    """BLEU of (summed) statistics without a zero count, plain or with add-one on the orders above 1."""
    logs = []
    for n, (m, t) in enumerate(zip(matches, totals), 1):
        if smooth == "add1" and n > 1:
            m, t = m + 1, t + 1
        logs.append(math.log(m / t))
    bp = 1.0 if c > r else math.exp(1 - r / c)
    return bp * math.exp(sum(logs) / len(logs))


def _sentence_range(m: list[int], t: list[int], c: int, r: int, smooth: str) -> tuple[float, float]:
    """The BLEU of one sentence under a convention, as a range: exact where the convention decides every count
    ("none": a zero match count gives 0; "add1": only a zero unigram count does), else (a smoothing that acts on
    zero counts only, a candidate shorter than an order) from 0 to its value with each such precision taken as 1."""
    if all(t):
        if all(m) or (smooth == "add1" and m[0]):
            value = _score(m, t, c, r, smooth)
            return value, value
        if smooth != "zeros":
            return 0.0, 0.0  # a zero count unsmoothed (or a zero unigram count under add-one)
    logs = [math.log(a / b) if a and b else 0.0 for a, b in zip(m, t)]
    bp = 1.0 if c > r else math.exp(1 - r / c)
    return 0.0, bp * math.exp(sum(logs) / len(logs))


def references_values(hyps: list[Tokens], refs: list[list[Tokens]], orders: list[int]) \
        -> list[tuple[float, float, str]] | None:
    """Every conventional BLEU of the sentences as a range (low, high: equal where the convention fixes it), with
    a description; None where smoothing would decide a corpus BLEU (a zero count summed over the corpus)."""
    values: list[tuple[float, float, str]] = []
    for order in orders:
        stats = [_stats(h, rs, order) for h, rs in zip(hyps, refs)]
        matches = [sum(s[0][n] for s in stats) for n in range(order)]
        totals = [sum(s[1][n] for s in stats) for n in range(order)]
        if not all(matches) or not all(totals):
            return None  # a zero count over the whole corpus: smoothing conventions decide the value
        c = sum(s[2] for s in stats)
        for tie, label in ((3, "shorter"), (4, "longer"), (5, "first listed")):
            r = sum(s[tie] for s in stats)
            for smooth in ("none", "add1", "zeros"):
                if smooth != "zeros":
                    corpus = _score(matches, totals, c, r, smooth)
                    values.append((corpus, corpus, f"corpus BLEU-{order}, {_SMOOTH[smooth]}, ties to the {label} "
                                                   "reference"))
                ranges = [_sentence_range(s[0], s[1], s[2], s[tie], smooth) for s in stats]
                low, high = sum(v[0] for v in ranges) / len(ranges), sum(v[1] for v in ranges) / len(ranges)
                values.append((low, high, f"mean sentence BLEU-{order}, {_SMOOTH[smooth]}, ties to the {label} "
                                          "reference"))
    return values


def _within(value: float, low: float, high: float) -> bool:
    return any(scale * low - max(RELATIVE * scale * abs(low), ABSOLUTE * scale) <= value <=
               scale * high + max(RELATIVE * scale * abs(high), ABSOLUTE * scale) for scale in (1.0, 100.0))


def check(name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    """(message, fix) when ``name()``'s value is no BLEU of its call's candidates and references; None otherwise."""
    value = scoredefs._number(result)
    if value is None or not math.isfinite(value):
        return None
    orders_given = [v for k, v in given.items() if k.lower() in _ORDER]
    if len(orders_given) > 1 or (orders_given and (type(orders_given[0]) is not int or not 1 <= orders_given[0] <= 8)):
        return None
    named = _named_order(name)
    default = [v for k, v in bound.items() if k.lower() in _ORDER and k not in given]
    default = [v for v in default if type(v) is int and 1 <= v <= 8]
    orders = [orders_given[0]] if orders_given else [named] if named else default[:1] if len(default) == 1 else \
        [1, 2, 3, 4]
    pairs = _pairs(given)
    if pairs is None:
        return None
    judged: list[tuple[float, float, str]] = []
    for hyps_raw, refs_raw in pairs:
        if len(hyps_raw) > MAX_SENTENCES:
            return None
        readings = _readings(hyps_raw, refs_raw)
        if readings is None:
            continue
        for hyps, refs in readings:
            if any(not h for h in hyps) or any(not r for g in refs for r in g) or \
                    sum(len(h) for h in hyps) + sum(len(r) for g in refs for r in g) > MAX_TOKENS:
                return None
            values = references_values(hyps, refs, orders)
            if values is None:
                return None  # smoothing would decide some reading: no premise
            if any(_within(value, low, high) for low, high, _ in values):
                return None
            judged.extend(values)
    if not judged:
        return None
    low, high, label = min(judged, key=lambda t: min(abs(value - t[0]), abs(value - t[1])))
    nearest = f"{low:.4f}" if high - low < 1e-12 else f"between {low:.4f} and {high:.4f}"
    return (f"{name}() returns {value:.4g} on the candidates and references of its call "
            f"({', '.join(repr(k) for k in given)}), but no BLEU of them is near it: the closest convention ({label}) "
            f"gives {nearest}, and none of corpus or mean sentence BLEU, orders {orders[0]}-{orders[-1]}, the "
            "closest reference length (any tie), no or add-one smoothing, as a fraction or in percent, comes "
            "within 1%: a brevity penalty that takes another reference length than the one closest to each candidate "
            "(the shortest reference, which lets a short candidate go unpenalised), n-gram counts not clipped by the "
            "references, or a mean of the precisions instead of their geometric mean are the usual causes, and the "
            "number reported is not the model's BLEU.",
            f"take each sentence's reference length as the length of its reference closest to the candidate's "
            f"(ties to the shorter), clip each n-gram's count by its most frequent reference count, or use "
            f"sacrebleu / nltk.translate.bleu_score.corpus_bleu; test {name}() on sentences whose BLEU you know")
