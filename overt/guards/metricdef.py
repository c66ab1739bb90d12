"""Is a metric function named after a well-known metric that metric? (slug ``metric-off-definition``;
issue 33).

A function of the running script named like a box IoU or GIoU (``iou``, ``box_iou``, ``bbox_iou``,
``giou``), a word or character error rate (``wer``, ``word_error_rate``, ``cer``), an NDCG (``ndcg``,
``ndcg_at_k``) or a CTC greedy decoder (``ctc_decode``) is checked against its definition
(:mod:`overt.guards.metricrefs`) on the inputs of its own first call: boxes and transcripts are
recomputed under every accepted convention; an NDCG is called again on two orderings of the call's list
(a most relevant item at rank 1 must beat it at rank 2, whatever the ideal); a CTC decoder on the call's
path with its runs kept once, every frame repeated, and reversed (the decoding depends only on the runs).
A value that matches none of the accepted conventions is reported.  The premise is checked first and
anything unfamiliar leaves the check silent: arguments that are not boxes, transcripts, one ranked list
of relevances or one path of ids, a call that passes further arguments (flags that switch the metric),
a result that is not numbers, transcripts that a normalisation step could change (punctuation, mixed
case), rows that are no boxes (judged per row only where they are), four 0/1 values (labels, not a box).

Quantile (pinball) losses and concordance indices are recomputed by :mod:`overt.guards.scoredefs` (a
``quantile_loss`` is claimed there although its name says loss), expected calibration errors by
:mod:`overt.guards.calibdef`, Spearman's rho and Kendall's tau by :mod:`overt.guards.rankcorr`, BLEU by
:mod:`overt.guards.bleudef`.

The probe itself runs at the end of the run (``MetricProbeChecks.end_of_run``), once per function.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Callable

import torch

from overt.guards.aside import user_code
from overt.guards import bleudef, calibdef, knnprobe, metricrank, overlapdef, rankcorr, scoredefs, topkfilter
from overt.guards import metricrefs as refs

#: name words that make a metric something else than the one its other words name
_OTHER = frozenset({"loss", "diou", "ciou", "miou", "mask", "masks", "seg", "segmentation", "pixel", "mean",
                    "map", "ap", "plot", "print", "log", "save", "update", "reset"})
#: name words that make a name no metric at all
_NEVER = frozenset({"loss", "plot", "print", "log", "save", "update", "reset", "map", "ap", "criterion"})
#: parameter names of an NDCG's cut-off
_CUTOFF = frozenset({"k", "topk", "top_k", "at_k", "n", "cutoff", "p"})


def definition_of(words: set[str]) -> str | None:
    """The well-known metric (or decoding rule) a function named with ``words`` claims to be: "iou",
    "giou", "wer", "cer", "ndcg", "ctc" (greedy CTC decoding), a ranking or reconstruction metric of
    :mod:`overt.guards.metricrank`, a top-k decoding filter (:mod:`overt.guards.topkfilter`), a k-NN
    classifier (:mod:`overt.guards.knnprobe`), or None."""
    claimed = topkfilter.definition_of(words) or knnprobe.definition_of(words) or scoredefs.definition_of(words) \
        or calibdef.definition_of(words) or rankcorr.definition_of(words) or bleudef.definition_of(words)
    if claimed is not None:
        return claimed
    if not words & _NEVER:
        ranked = metricrank.definition_of(words)
        if ranked is not None:
            return ranked
    overlap = overlapdef.definition_of(words)  # mask IoU / Dice, non-maximum suppression
    if overlap is not None:
        return overlap
    if words & _OTHER:
        return None
    if "giou" in words or ("iou" in words and words & {"generalized", "generalised"}):
        return "giou"
    if "iou" in words:
        return "iou"
    if "wer" in words or {"word", "error"} <= words:
        return "wer"
    if "cer" in words or ("error" in words and words & {"char", "character", "characters"}):
        return "cer"
    if "ndcg" in words:
        return "ndcg"
    if "ctc" in words and words & {"decode", "decoder", "decoding", "collapse", "greedy"}:
        return "ctc"
    return None


def _quiet(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    sink = io.StringIO()
    with torch.no_grad(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), user_code():
        return fn(*args, **kwargs)


def _show(values: torch.Tensor) -> str:
    if values.numel() == 1:
        return f"{float(values):.4g}"
    return f"{float(values.reshape(-1)[0]):.4g} (first of {values.numel()})"


def _pair(given: dict[str, Any]) -> tuple[tuple[str, Any], tuple[str, Any]] | None:
    """The call's two arguments, (name, value) each, when exactly two were passed."""
    if len(given) != 2:
        return None
    first, second = given.items()
    return first, second


def _boxes(metric: str, name: str, given: dict[str, Any], result: Any) -> tuple[str, str] | None:
    pair = _pair(given)
    if pair is None:
        return None
    (pa, a), (pb, b) = pair
    ba, bb = refs.as_boxes(a), refs.as_boxes(b)
    value = refs.values(result)
    if ba is None or bb is None or value is None:
        return None
    if any(bool(((t == 0) | (t == 1)).all()) for t in (ba, bb)):
        return None  # 0/1 values: four labels of a multi-label IoU, not a box
    found = refs.box_mismatch(ba, bb, value, giou=metric == "giou")
    if found is None:
        return None  # a convention of the metric, or boxes it cannot judge
    got, expected, pixel = found
    label = "GIoU" if metric == "giou" else "IoU"
    if pixel:
        cause = ("it adds 1 to every width and height (the integer pixel convention) of boxes whose "
                 "coordinates are normalised to [0, 1], where 1 is the size of the whole image: every box then "
                 "overlaps every other almost completely")
        fix = f"drop the + 1 from {name}() for normalised boxes (it counts pixels of integer pixel boxes only)"
    else:
        cause = ("it matches no convention of the metric (corner, corner-size or centre-size boxes; sizes "
                 "continuous, or + 1 on integer pixel coordinates)")
        fix = (f"trace {name}() on two boxes whose {label} you know (a box with itself: 1; two disjoint boxes: "
               "0), or use torchvision.ops.box_iou / generalized_box_iou")
    return (f"{name}() gives {_show(got)} on the boxes of its call ({pa!r}, {pb!r}), where their {label} is "
            f"{_show(expected)}: {cause}.", fix)


def _rates(metric: str, name: str, given: dict[str, Any], result: Any) -> tuple[str, str] | None:
    pair = _pair(given)
    if pair is None:
        return None
    (pa, a), (pb, b) = pair
    ta, tb = refs.transcripts(a), refs.transcripts(b)
    value = refs.values(result)
    if ta is None or tb is None or len(ta) != len(tb) or value is None or value.numel() != 1:
        return None
    number = float(value)
    unit = "words" if metric == "wer" else "chars"
    if metric == "cer" and not refs.evenly_spaced(ta + tb):
        return None  # spaces a normalisation may collapse: conventions differ on them
    if refs.matches_rate(number, ta, tb, unit) is not False:
        return None
    also = "tokens" if metric == "wer" else "nospace"  # split at each space; characters without the spaces
    if refs.matches_rate(number, ta, tb, also) is not False:
        return None
    expected = refs.error_rates(ta, tb, unit) or refs.error_rates(refs=tb, hyps=ta, unit=unit)
    if expected is None:
        return None
    label = "word error rate" if metric == "wer" else "character error rate"
    other = "chars" if metric == "wer" else "words"
    if refs.matches_rate(number, ta, tb, other) or (metric == "wer" and refs.matches_rate(number, ta, tb, "nospace")):
        counted = "characters, not words" if metric == "wer" else "words, not characters"
        cause = (f"it is the {'character' if metric == 'wer' else 'word'} error rate of the same transcripts: it "
                 f"counts edits of {counted}")
    else:
        cause = ("it matches no convention of the metric (edits over the reference's length, summed over the "
                 "corpus or averaged over the utterances, either argument as the reference, as a fraction or in "
                 "percent)")
    units = "words (text.split())" if metric == "wer" else "characters"
    fix = (f"compute the {label} as edit distance over the reference's {units}, or use a maintained "
           "implementation (jiwer, torchmetrics.text)")
    return (f"{name}() gives {number:.4g} on the transcripts of its call ({pa!r}, {pb!r}), where their {label} is "
            f"{expected[0]:.4g} (over the corpus; {expected[1]:.4g} averaged over the utterances): {cause}.", fix)


def _ndcg(fn: Callable, name: str, given: dict[str, Any], bound: dict[str, Any]) -> tuple[str, str] | None:
    lists = {p: refs.relevances(v) for p, v in given.items()}
    lists = {p: v for p, v in lists.items() if v is not None}
    if len(lists) != 1:
        return None
    (param, rels), = lists.items()
    others = {p: v for p, v in bound.items() if p != param}
    cutoff = [v for p, v in others.items() if p.lower() in _CUTOFF and isinstance(v, int) and not isinstance(v, bool)]
    if any(p.lower() not in _CUTOFF or not isinstance(v, int) or isinstance(v, bool) for p, v in others.items()) \
            or len(cutoff) > 1 or (cutoff and cutoff[0] < 2):
        return None
    k = cutoff[0] if cutoff else None
    pair = refs.top_pair(rels)
    if pair is None:
        return None
    scores = []
    for variant in pair:
        args = dict(bound)
        args[param] = refs.like(variant, given[param])
        try:
            value = refs.values(_quiet(fn, **args))
        except Exception:  # noqa: BLE001  the user's function on other values: no premise
            return None
        if value is None or value.numel() != 1:
            return None
        scores.append(float(value))
    up, down = scores
    if up > down + 1e-9 * max(1.0, abs(up)):
        return None
    at = f"@{k}" if k else ""
    best, worst = pair[0][0], pair[0][1]
    return (f"{name}() scores the ranked list of its call ({param!r}) {up:.4g} with its most relevant item "
            f"(relevance {best:g}) at rank 1 and a least relevant one ({worst:g}) at rank 2, and {down:.4g} with the "
            f"two swapped: NDCG{at} discounts rank 2 strictly more than rank 1 (1/log2(rank + 1), whatever the "
            f"ideal: here {refs.ndcg(pair[0], k)[0]:.4g} against {refs.ndcg(pair[1], k)[0]:.4g} with the list's "
            "own), so the function does not rank as NDCG does (a position discount off by one, a discount that "
            "starts late) and moving a relevant item up is not rewarded.",
            "discount rank r (from 1) by log2(r + 1), i.e. log2(i + 2) for 0-based i, and divide by the DCG of "
            "the ideal ordering; or use sklearn.metrics.ndcg_score / torchmetrics.retrieval")


def _tokens(result: Any) -> list[int] | None:
    if isinstance(result, (torch.Tensor,)) or (hasattr(result, "shape") and hasattr(result, "tolist")):
        result = result.tolist()
    if isinstance(result, (list, tuple)) and all(type(v) is int for v in result):
        return list(result)
    return None


def _ctc(fn: Callable, name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    paths = {p: refs.sequence(v, integers=True) for p, v in given.items()}
    paths = {p: v for p, v in paths.items() if v is not None}
    got = _tokens(result)
    if len(paths) != 1 or got is None:
        return None
    (param, path), = paths.items()
    runs = [v for i, v in enumerate(path) if i == 0 or v != path[i - 1]]  # each run of a frame once
    doubled = [v for v in path for _ in (0, 1)]  # each frame twice
    variants = (("with each run of repeated frames kept once", runs, got),
                ("with every frame repeated", doubled, got),
                ("reversed", path[::-1], got[::-1]))
    for label, variant, expected in variants:
        if variant == path:
            continue
        args = dict(bound)
        args[param] = refs.like(variant, given[param])
        try:
            other = _tokens(_quiet(fn, **args))
        except Exception:  # noqa: BLE001  the user's function on other values: no premise
            return None
        if other is None or other == expected:
            continue
        shown = f"{_short(other)} (reversed: {_short(other[::-1])})" if label == "reversed" else _short(other)
        return (f"{name}() decodes the frame path of its call ({param!r}) as {_short(got)}, but the same path "
                f"{label} as {shown}: a CTC greedy decoding (merge repeated frames, then drop the blanks) "
                "depends only on the runs of the path, in either direction, not on their lengths, so the function "
                "keeps or loses a token by where the path happens to end or begin (a final frame appended "
                "unchecked, a first frame skipped).",
                f"decode with one rule for every frame: keep frame t when it differs from frame t - 1 and is not "
                f"the blank (e.g. torch.unique_consecutive, then drop the blank id); test {name}() on a path that "
                "ends in exactly one blank frame")
    return None


def _short(tokens: list[int]) -> str:
    return str(tokens) if len(tokens) <= 12 else f"{str(tokens[:12])[:-1]}, ... ({len(tokens)} tokens)]"


def check(fn: Callable, metric: str, name: str, given: dict[str, Any], bound: dict[str, Any],
          result: Any) -> tuple[str, str] | None:
    """(message, fix) when ``fn`` -- named after ``metric`` -- gives a value no convention of that
    metric gives on its call's arguments (``given``: the arguments passed, ``bound``: with defaults);
    None when it agrees or the premise does not hold."""
    if metric in ("iou", "giou"):
        found = _boxes(metric, name, given, result)
        if found is None and metric == "iou" and not any(refs.as_boxes(v) is not None for v in given.values()):
            return overlapdef.check_masks(metric, name, given, result)  # an IoU of masks, not of boxes
        return found
    if metric in ("mask-iou", "mask-dice"):
        return overlapdef.check_masks(metric, name, given, result)
    if metric == "nms":
        return overlapdef.check_nms(name, given, bound, result)
    if metric in ("wer", "cer"):
        return _rates(metric, name, given, result)
    if metric == "ndcg":
        return _ndcg(fn, name, given, bound)
    if metric == "ctc":
        return _ctc(fn, name, given, bound, result)
    if metric == "topk-filter":
        return topkfilter.check(fn, name, given, bound)
    if metric == "topp-filter":
        return topkfilter.check_nucleus(fn, name, given, bound)
    if metric == "knn":
        return knnprobe.check(fn, name, given, bound, result)
    if metric in ("pinball", "c-index"):
        return scoredefs.check(fn, metric, name, given, bound, result)
    if metric == "ece":
        return calibdef.check(name, given, bound, result)
    if metric == "bleu":
        return bleudef.check(name, given, bound, result)
    if metric in ("spearman", "kendall"):
        return rankcorr.check(metric, name, given, bound, result)
    return metricrank.check(fn, metric, name, given, bound, result)
