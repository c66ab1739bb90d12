"""Overlap measures of masks and non-maximum suppression, recomputed by their definitions (slug
``metric-off-definition``; issue 33).

Two definitions, each checked on the arguments of a script function's own call:

* the IoU (Jaccard index) and the Dice coefficient of two binary masks, ``|A & B| / |A | B|`` and
  ``2 |A & B| / (|A| + |B|)``.  The accepted conventions: counts pooled over the whole tensor, or the
  measure taken per item (per image along the first dimension; per channel along the second, or per image
  and channel, of ``(N, C, H, W)`` masks) and averaged, an item empty on both sides skipped or scored 1 or 0, a smoothing term of 1 added
  to both counts (per item or pooled), one value per item instead of the mean, the mean of the foreground's
  and the background's measure (the mIoU of a two-class label map), a fraction or a percent;
  either argument may be the prediction.  Judged only when both arguments are binary masks of one shape
  (0/1 values or booleans, beyond dimensions of size 1): soft scores, logits and label maps with more
  than two ids are left alone (a threshold, a softmax, a class list and an ignored id are conventions
  the call does not show).
* greedy non-maximum suppression: boxes taken by decreasing score, each kept unless its IoU with a box
  already kept exceeds the threshold.  The accepted conventions: corner, corner-size or centre-size boxes,
  sizes continuous or (pixel coordinates only) counted with ``+ 1``, suppression at ``> t`` or ``>= t``,
  the kept list cut after its first boxes (a cap on detections); the result given as indices (any order)
  or as a keep mask.  Judged only when the call passes boxes ``(N, 4)`` and their scores ``(N,)`` (or
  ``(N, 5)`` rows with the score last) and one threshold in ``(0, 1)`` and nothing else, with every
  score distinct (a tie makes the greedy order a convention) and every box a box.

Pure functions of their inputs; each returns None when its premise does not hold.
"""

from __future__ import annotations

from typing import Any

import torch

from overt.guards import metricrefs as refs

#: name words of an overlap measure of masks (the word "iou" alone is a box IoU first: metricdef)
MASK_WORDS = frozenset({"miou", "jaccard", "dice", "mask", "masks", "seg", "segmentation", "pixel"})
#: name words that make an overlap name something else (a loss is optimised, not reported; its terms vary)
_NOT = frozenset({"loss", "criterion", "objective", "plot", "print", "log", "save", "update", "reset", "box",
                  "boxes", "bbox", "diou", "ciou", "giou", "soft", "map", "ap"})
#: most elements a mask reference reads (a few tenths of a second at most)
MAX_ELEMENTS = 20_000_000
#: most boxes a greedy NMS reference suppresses
MAX_BOXES = 3000


def definition_of(words: set[str] | frozenset[str]) -> str | None:
    """"mask-iou", "mask-dice" or "nms" for a function named after one of them, else None."""
    if words & {"nms"} or {"non", "maximum", "suppression"} <= words or {"non", "max", "suppression"} <= words:
        # soft, matrix and weighted NMS rescore or merge boxes: another definition
        return None if words & {"loss", "plot", "print", "log", "save", "soft", "matrix", "weighted"} else "nms"
    if words & _NOT:
        return None
    if "dice" in words:
        return "mask-dice"
    if words & {"iou", "miou", "jaccard"} and (words & MASK_WORDS or "mean" in words):
        return "mask-iou"
    return None


# --------------------------------------------------------------------------- masks


def _tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu")
    if hasattr(x, "shape") and hasattr(x, "dtype") and getattr(x.dtype, "kind", "") in "biuf":
        try:
            return torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def as_mask(x: Any) -> torch.Tensor | None:
    """``x`` as a bool tensor when it is a binary mask (booleans, or numbers all 0 or 1) of at least two
    elements, its dimensions of size 1 dropped; else None."""
    t = _tensor(x)
    if t is None or t.numel() < 2 or t.numel() > MAX_ELEMENTS or t.is_complex():
        return None
    if t.dtype != torch.bool:
        if not bool(((t == 0) | (t == 1)).all()):
            return None
        t = t != 0
    return t.squeeze() if t.ndim > 1 else t


def _items(a: torch.Tensor, b: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(intersection, union, sizes summed) counted per item, for each way of cutting the masks into items."""
    cuts = {"pooled": a.reshape(1, -1), "image": None, "channel": None, "image-channel": None}
    cuts_b = {"pooled": b.reshape(1, -1)}
    if a.ndim >= 2:
        cuts["image"], cuts_b["image"] = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    if a.ndim >= 4:  # (N, C, H, W ...): a channel axis beside the image axis
        cuts["channel"] = a.transpose(0, 1).reshape(a.shape[1], -1)
        cuts_b["channel"] = b.transpose(0, 1).reshape(b.shape[1], -1)
        cuts["image-channel"] = a.reshape(a.shape[0] * a.shape[1], -1)
        cuts_b["image-channel"] = b.reshape(b.shape[0] * b.shape[1], -1)
    out = {}
    for cut, ma in cuts.items():
        if ma is None:
            continue
        mb = cuts_b[cut]
        inter = (ma & mb).sum(1).to(torch.float64)
        sizes = ma.sum(1).to(torch.float64) + mb.sum(1).to(torch.float64)
        out[cut] = (inter, sizes)
    return out


def _ratio(inter: torch.Tensor, sizes: torch.Tensor, dice: bool, smooth: float) -> torch.Tensor:
    union = sizes - inter
    if dice:
        return (2 * inter + smooth) / (sizes + smooth)
    return (inter + smooth) / (union + smooth)


def _per_item(a: torch.Tensor, b: torch.Tensor, dice: bool) -> dict[tuple[str, float], torch.Tensor]:
    """The measure per item for each cut and smoothing term (items empty on both sides NaN unsmoothed)."""
    out = {}
    for cut, (inter, sizes) in _items(a, b).items():
        empty = sizes == 0
        for smooth in (0.0, 1.0):
            per = _ratio(inter, sizes.clamp(min=1e-300) if smooth == 0 else sizes, dice, smooth)
            out[cut, smooth] = torch.where(empty, torch.full_like(per, float("nan")), per) if smooth == 0 else per
    return out


def _reduced(per: torch.Tensor, cut: str) -> list[torch.Tensor]:
    """A per-item measure's accepted reductions: the mean with empty (NaN) items skipped, scored 1, scored 0;
    and the per-item values themselves."""
    empty = torch.isnan(per)
    out = []
    if bool((~empty).any()):
        out.append(per[~empty].mean().reshape(1))
    if bool(empty.any()):
        out.append(torch.where(empty, torch.ones_like(per), per).mean().reshape(1))
        out.append(torch.where(empty, torch.zeros_like(per), per).mean().reshape(1))
    if cut != "pooled":
        out.append(per)
    return out


def mask_values(a: torch.Tensor, b: torch.Tensor, dice: bool) -> list[torch.Tensor]:
    """Every accepted convention's value of the IoU (or Dice) of binary masks ``a`` and ``b``: a one-element
    tensor for a mean, one value per item for a per-item result (empty items as NaN: any value passes).  Also
    the mean over the two classes of a binary segmentation, foreground and background (``~a``, ``~b``): the
    mIoU of a two-class label map, per item or per class first."""
    fg, bg = _per_item(a, b, dice), _per_item(~a, ~b, dice)
    out = []
    for (cut, smooth), per in fg.items():
        out += _reduced(per, cut)
        both = torch.stack([per, bg[cut, smooth]])
        known = (~torch.isnan(both)).sum(0)
        per_item = torch.where(known > 0, torch.nan_to_num(both).sum(0) / known.clamp(min=1),
                               torch.full_like(per, float("nan")))
        out += _reduced(per_item, cut)  # each item's classes averaged, then the items
        for f, g in zip(_reduced(per, cut), _reduced(bg[cut, smooth], cut)):
            if f.numel() == 1 and g.numel() == 1:
                out.append((f + g) / 2)  # each class over the items, then the two classes
    return out


def mask_mismatch(a: torch.Tensor, b: torch.Tensor, value: torch.Tensor, dice: bool) \
        -> tuple[float, float, float] | None:
    """When ``value`` is the IoU (Dice) of masks ``a`` and ``b`` under no accepted convention: (the user's
    value, the pooled IoU, the pooled Dice); else None (a convention, or a value no convention can judge:
    another count of values than one or one per item)."""
    if a.shape != b.shape:
        return None
    value = value.reshape(-1).to(torch.float64)
    candidates = mask_values(a, b, dice)
    judged = False
    for ref in candidates:
        if ref.numel() != value.numel():
            continue
        judged = True
        for scale in (1.0, 100.0):
            known = ~torch.isnan(ref)
            if bool(known.any()) and refs.close(value[known], ref[known] * scale):
                return None
            if not bool(known.any()):
                return None
    if not judged or value.numel() != 1:
        return None  # per-item values are compared above; a mismatch is reported on a mean only
    inter, sizes = _items(a, b)["pooled"]
    if float(sizes[0]) == 0:
        return None
    iou = float(inter[0] / (sizes[0] - inter[0])) if float(sizes[0] - inter[0]) else 1.0
    return float(value[0]), iou, float(2 * inter[0] / sizes[0])


def check_masks(metric: str, name: str, given: dict[str, Any], result: Any) -> tuple[str, str] | None:
    """(message, fix) when ``name``'s value on the two binary masks of its call is no convention of the IoU
    (``metric`` "iou"/"mask-iou") or Dice ("mask-dice"); None otherwise or when the premise fails."""
    if len(given) != 2:
        return None
    (pa, a), (pb, b) = given.items()
    ma, mb = as_mask(a), as_mask(b)
    value = refs.values(result)
    if ma is None or mb is None or value is None or ma.shape != mb.shape:
        return None
    dice = metric == "mask-dice"
    found = mask_mismatch(ma, mb, value, dice)
    if found is None:
        return None
    got, iou, dsc = found
    label = "Dice coefficient" if dice else "IoU"
    if got > 1.5:  # a percent
        iou, dsc = 100 * iou, 100 * dsc
    expected = dsc if dice else iou
    other = mask_mismatch(ma, mb, value, not dice) is None
    if other:
        cause = (f"it is the {'IoU' if dice else 'Dice coefficient'} of the same masks ("
                 f"{'|A & B| / |A | B|' if dice else '2 |A & B| / (|A| + |B|): the intersection counted twice'}), "
                 f"reported as the {label}")
    else:
        cause = ("it matches no convention of the measure (counts pooled, or the measure per image or per "
                 "channel averaged with empty items skipped or scored 1 or 0, a smoothing term of 1, a fraction "
                 "or a percent)")
    formula = "2 * |A & B| / (|A| + |B|)" if dice else "|A & B| / |A | B| (union = |A| + |B| - |A & B|)"
    fix = (f"compute {name}() as {formula} of the binary masks; check it on two masks whose {label} you know "
           "(a mask with itself: 1; half of a mask against the whole: 0.5 for IoU), or use "
           f"torchmetrics.{'classification.BinaryJaccardIndex' if not dice else 'segmentation.DiceScore'}")
    return (f"{name}() gives {got:.4g} on the binary masks of its call ({pa!r}, {pb!r}), where their {label} is "
            f"{expected:.4g} (counts pooled; IoU {iou:.4g}, Dice {dsc:.4g}): {cause}.", fix)


# --------------------------------------------------------------------------- suppression


def _scores(x: Any) -> torch.Tensor | None:
    t = _tensor(x)
    if t is None or t.ndim != 1 or t.numel() < 2 or not t.is_floating_point() or not bool(torch.isfinite(t).all()):
        return None
    return t.to(torch.float64)


def _threshold(x: Any) -> float | None:
    """``x`` as a threshold strictly between 0 and 1 (a number, or a one-element tensor or array), else None."""
    if isinstance(x, bool):
        return None
    if not isinstance(x, (int, float)):
        t = _tensor(x)
        if t is None or t.numel() != 1 or t.dtype == torch.bool:
            return None
        x = float(t.reshape(-1)[0])
    return float(x) if 0 < float(x) < 1 else None


def nms_inputs(given: dict[str, Any], bound: dict[str, Any]) -> tuple[str, torch.Tensor, torch.Tensor, float] | None:
    """(the boxes' parameter, boxes (N, 4), scores (N,), threshold) of an NMS call, else None."""
    boxes = scores = None
    thresholds = []
    for p, v in bound.items():
        t = _tensor(v)
        if t is not None and t.ndim == 2 and t.shape[1] in (4, 5) and boxes is None:
            boxes = (p, t)
        elif t is not None and t.ndim == 1 and t.numel() >= 2 and scores is None:
            scores = (p, t)
        elif _threshold(v) is not None:
            thresholds.append(_threshold(v))
        else:
            return None  # another argument (a cap, a class list, a flag): no premise
    if boxes is None or len(thresholds) != 1:
        return None
    p, b = boxes
    if b.shape[1] == 5 and scores is None:
        s, b = b[:, 4], b[:, :4]
    elif b.shape[1] == 4 and scores is not None:
        s = scores[1]
    else:
        return None
    b = refs.as_boxes(b)
    s = _scores(s)
    if b is None or s is None or b.shape[0] != s.shape[0] or b.shape[0] > MAX_BOXES:
        return None
    if s.unique().numel() != s.numel():
        return None  # tied scores: the greedy order among them is a convention
    return p, b, s, thresholds[0]


def greedy_nms(boxes: torch.Tensor, scores: torch.Tensor, thresh: float, pad: float, inclusive: bool) -> list[int]:
    """The indices greedy NMS keeps, in decreasing score (corner boxes)."""
    order = scores.argsort(descending=True).tolist()
    iou = refs._overlap(boxes[:, None], boxes[None], pad, giou=False)
    kept: list[int] = []
    for i in order:
        over = iou[i, kept] >= thresh if inclusive else iou[i, kept] > thresh
        if not kept or not bool(over.any()):
            kept.append(i)
    return kept


def _kept(result: Any, n: int) -> set[int] | None:
    """The indices a user's NMS kept: from an index list (any order) or a keep mask of length ``n``."""
    t = _tensor(result) if not isinstance(result, (list, tuple)) else None
    if isinstance(result, (list, tuple)):
        if not all(type(v) is int for v in result):
            return None
        values = list(result)
    elif t is None or t.ndim != 1:
        return None
    elif t.dtype == torch.bool:
        return set(torch.nonzero(t).reshape(-1).tolist()) if t.numel() == n else None
    elif t.is_floating_point() or t.is_complex():
        return None
    else:
        values = t.tolist()
    if len(set(values)) != len(values) or any(v < 0 or v >= n for v in values):
        return None
    return set(values)


def check_nms(name: str, given: dict[str, Any], bound: dict[str, Any], result: Any) -> tuple[str, str] | None:
    """(message, fix) when an NMS call keeps another set of boxes than greedy NMS of the same boxes, scores
    and threshold keeps under every accepted convention; None otherwise or when the premise fails."""
    found = nms_inputs(given, bound)
    if found is None:
        return None
    param, boxes, scores, thresh = found
    kept = _kept(result, boxes.shape[0])
    if kept is None or not kept:
        return None
    pads = (0.0,) if refs.normalised(boxes) else (0.0, 1.0)
    reference = None
    for fmt in ("xyxy", "xywh", "cxcywh"):
        corners = refs._corners(boxes, fmt)
        if not bool((corners[:, 2:] >= corners[:, :2]).all()):
            continue  # not boxes in this format
        for pad in pads:
            for inclusive in (False, True):
                ref = greedy_nms(corners, scores, thresh, pad, inclusive)
                if kept == set(ref) or (len(kept) < len(ref) and kept == set(ref[:len(kept)])):
                    return None
                if reference is None and fmt == "xyxy" and pad == 0.0 and not inclusive:
                    reference = ref
    if reference is None:
        return None  # boxes in no format the reference knows
    iou = refs._overlap(boxes[:, None], boxes[None], 0.0, giou=False)
    dropped = [i for i in reference if i not in kept]
    extra = sorted(kept - set(reference), key=lambda i: -float(scores[i]))
    if dropped:
        i = dropped[0]
        higher = [j for j in reference if float(scores[j]) > float(scores[i])]
        most = max((float(iou[i, j]) for j in higher), default=0.0)
        detail = (f"it drops box {i} (score {float(scores[i]):.4g}), whose IoU with every higher-scoring box "
                  f"greedy NMS keeps is at most {most:.3g}, not above the threshold {thresh:g}")
        if most == 0.0:
            detail += " (it overlaps none of them at all)"
    else:
        i = extra[0]
        j = max((j for j in reference if float(scores[j]) > float(scores[i])), key=lambda j: float(iou[i, j]))
        detail = (f"it keeps box {i} (score {float(scores[i]):.4g}), whose IoU with the higher-scoring kept box "
                  f"{j} is {float(iou[i, j]):.3g}, above the threshold {thresh:g}")
    return (f"{name}() keeps {len(kept)} of the {boxes.shape[0]} boxes of its call ({param!r}), where greedy "
            f"non-maximum suppression of the same boxes, scores and threshold {thresh:g} keeps {len(reference)}: "
            f"{detail}. Its overlap is not the boxes' IoU (an intersection from the wrong corners, an area "
            "without its sizes, a union that counts the intersection twice), so detections of neighbouring "
            "objects are suppressed or duplicates survive.",
            f"compute the overlap in {name}() as the IoU of corner boxes (intersection from the larger top-left "
            "and the smaller bottom-right corners, clamped at 0), or use torchvision.ops.nms / batched_nms; "
            "check it on two disjoint boxes (both kept) and a box with its own duplicate (one kept)")
