"""metric-off-definition and metric-imperfect-on-truth for overlap measures of masks and for non-maximum
suppression (overt/guards/overlapdef.py, overt/guards/metricprobe.py; issue 33, w280, w289, w292): a mask
IoU or Dice, or an NMS, of the running script is recomputed by its definition on its own call's inputs.
Planted bugs on a real small run (digits), each with a correct twin, and the accepted conventions (per-image
means with empty images scored 1, a smoothing term, percent, ``>=`` suppression, a keep mask) stay quiet."""

from __future__ import annotations

import numpy as np
import torch

from overt.guards import metricdef, overlapdef
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

# -- masks -------------------------------------------------------------------------------------------

MASKS = '''
def {name}(pred, target):
    inter = (pred * target).sum()
    union = ((pred + target) > 0).float().sum()
    return ({ratio}).item()


with torch.no_grad():
    shift = model(x[:300])[:, :1, None].tanh()
img = x[:300].reshape(-1, 1, 8, 8)
target = (img > 0.3).float()
pred = (img * (1 + 0.6 * shift[:, :, :, None]) > 0.35).float()
print("IoU", {name}(pred, target))
'''


def test_a_mask_iou_that_returns_the_dice_coefficient_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, MASKS.format(name="iou", ratio="2 * inter / (inter + union)"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert findings[0]["where"].startswith("iou() at ") and "Dice coefficient" in findings[0]["message"]
    assert _run(tmp_path, MASKS.format(name="iou", ratio="inter / union")) == []


def test_a_dice_score_that_returns_the_iou_is_named_and_a_smoothed_dice_is_quiet(tmp_path):
    findings = _run(tmp_path, MASKS.format(name="dice_score", ratio="inter / union"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "it is the IoU of the same masks" in findings[0]["message"]
    smoothed = "(2 * inter + 1) / (pred.sum() + target.sum() + 1)"
    assert _run(tmp_path, MASKS.format(name="dice_score", ratio=smoothed)) == []


PER_IMAGE = '''
def mask_iou(pred_masks, gt_masks):
    """numpy, per image, an image empty on both sides scored 1, in percent."""
    scores = []
    for p, g in zip(pred_masks, gt_masks):
        inter = np.logical_and(p, g).sum()
        union = {union}
        scores.append(1.0 if union == 0 else inter / union)
    return 100 * float(np.mean(scores))


with torch.no_grad():
    shift = model(x[:300])[:, 0].numpy()
img = x[:300].reshape(-1, 8, 8).numpy()
gt = img > 0.5
gt[:20] = False
pred = img * (1 + 0.5 * np.tanh(shift))[:, None, None] > 0.55
pred[:20] = False
print("mIoU", mask_iou(pred, gt))
'''


def test_a_per_image_mask_iou_in_percent_is_quiet_and_a_union_without_the_intersection_taken_out_is_named(tmp_path):
    assert _run(tmp_path, PER_IMAGE.format(union="np.logical_or(p, g).sum()")) == []
    findings = _run(tmp_path, PER_IMAGE.format(union="p.sum() + g.sum()"))
    # a perfect prediction scores 50 there: the truth probe names it too
    assert "metric-off-definition" in _slugs(findings), findings


def test_mask_references_stay_quiet_where_they_cannot_judge():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(0, 3, (4, 8, 8), generator=g), torch.randint(0, 3, (4, 8, 8), generator=g)
    # label maps with three ids: the class list and the absent-class rule are not in the call
    assert metricdef.check(None, "mask-iou", "miou", {"pred": a, "target": b}, {}, 0.123) is None
    # soft scores: a threshold or a soft IoU are conventions the call does not show
    soft = torch.rand(4, 8, 8, generator=g)
    assert metricdef.check(None, "mask-iou", "mask_iou", {"pred": soft, "target": b > 0}, {}, 0.123) is None
    # one value per image that is each image's IoU: a convention
    pa, pb = a > 0, b > 0
    per = (pa & pb).flatten(1).sum(1) / (pa | pb).flatten(1).sum(1)
    assert metricdef.check(None, "mask-iou", "mask_iou", {"pred": pa, "target": pb}, {}, per) is None
    assert metricdef.check(None, "mask-iou", "mask_iou", {"pred": pa, "target": pb}, {}, per * 0.5) is None
    # the mIoU of a two-class label map: foreground and background averaged
    two = torch.stack([per, (~pa & ~pb).flatten(1).sum(1) / (~pa | ~pb).flatten(1).sum(1)]).mean(0).mean()
    assert metricdef.check(None, "mask-iou", "mean_iou", {"pred": pa.long(), "target": pb.long()}, {}, two) is None
    # and a Dice reported under the IoU's name is named
    dice = 2 * (pa & pb).sum() / (pa.sum() + pb.sum())
    found = metricdef.check(None, "mask-iou", "mean_iou", {"pred": pa, "target": pb}, {}, dice)
    assert found is not None and "Dice coefficient" in found[0]


def test_overlap_names():
    assert overlapdef.definition_of({"iou", "mask"}) == "mask-iou"
    assert overlapdef.definition_of({"dice", "coefficient"}) == "mask-dice"
    assert overlapdef.definition_of({"py", "cpu", "nms"}) == "nms"
    for other in ({"dice", "loss"}, {"soft", "nms"}, {"box", "iou"}, {"soft", "dice"}, {"iou"}):
        assert overlapdef.definition_of(other) is None, other


# -- non-maximum suppression --------------------------------------------------------------------------

NMS = '''
def nms(boxes, scores, thresh=0.5):
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    order = scores.argsort()[::-1]
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(i)
        xx1 = np.maximum(x1[i], x1[order[1:]])
        yy1 = np.maximum(y1[i], y1[order[1:]])
        xx2 = {corner}(x2[i], x2[order[1:]])
        yy2 = {corner}(y2[i], y2[order[1:]])
        inter = np.maximum(0.0, xx2 - xx1) * np.maximum(0.0, yy2 - yy1)
        ovr = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[1:][ovr <= thresh]
    return np.array(keep)


rng = np.random.default_rng(0)
tl = rng.random((60, 2)) * 80
boxes = np.concatenate([tl, tl + 8 + 12 * rng.random((60, 2))], 1)
model.eval()
with torch.no_grad():
    scores = model(x[:60]).softmax(1)[:, 0].double().numpy()
print("kept", len(nms(boxes, scores, 0.4)))
'''


def test_an_nms_whose_intersection_takes_the_outer_corner_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, NMS.format(corner="np.maximum"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert findings[0]["where"].startswith("nms() at ") and "greedy non-maximum suppression" in findings[0]["message"]
    assert _run(tmp_path, NMS.format(corner="np.minimum")) == []


TORCH_NMS = '''
def non_max_suppression(dets, iou_threshold):
    """torch, (N, 5) rows with the score last, suppression at >= the threshold, a keep mask."""
    order = dets[:, 4].argsort(descending=True)
    b = dets[:, :4]
    keep = torch.zeros(len(dets), dtype=torch.bool)
    alive = torch.ones(len(dets), dtype=torch.bool)
    for i in order.tolist():
        if not alive[i]:
            continue
        keep[i] = True
        lt = torch.maximum(b[i, :2], b[:, :2])
        rb = torch.minimum(b[i, 2:], b[:, 2:])
        inter = (rb - lt).clamp(min=0).prod(1)
        area = (b[:, 2:] - b[:, :2]).prod(1)
        iou = inter / (area[i] + area - inter {extra})
        alive &= iou < iou_threshold
    return keep


g = torch.Generator().manual_seed(1)
tl = torch.rand(50, 2, generator=g) * 0.7
with torch.no_grad():
    s = model(x[100:150]).softmax(1)[:, 3]
dets = torch.cat([tl, tl + 0.1 + 0.2 * torch.rand(50, 2, generator=g), s[:, None]], 1)
print("kept", int(non_max_suppression(dets, 0.3).sum()))
'''


def test_a_torch_nms_with_a_keep_mask_is_quiet_and_a_union_counting_the_intersection_twice_is_named(tmp_path):
    assert _run(tmp_path, TORCH_NMS.format(extra="")) == []
    findings = _run(tmp_path, TORCH_NMS.format(extra="+ inter"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "it keeps box" in findings[0]["message"]


def test_nms_references_stay_quiet_where_they_cannot_judge():
    b = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [30, 30, 40, 40]])
    tied = torch.tensor([0.9, 0.9, 0.5])
    assert overlapdef.check_nms("nms", {}, {"boxes": b, "scores": tied, "t": 0.5}, torch.tensor([0])) is None
    s = torch.tensor([0.9, 0.8, 0.5])
    # a further argument (a cap, class ids): no premise
    assert overlapdef.check_nms("nms", {}, {"boxes": b, "scores": s, "t": 0.5, "top": 100}, [0]) is None
    # the greedy result, and its first box only (a cap on detections), pass; a missing disjoint box does not
    assert overlapdef.check_nms("nms", {}, {"boxes": b, "scores": s, "t": 0.5}, [2, 0]) is None
    assert overlapdef.check_nms("nms", {}, {"boxes": b, "scores": s, "t": 0.5}, [0]) is None
    assert overlapdef.check_nms("nms", {}, {"boxes": b, "scores": s, "t": 0.5}, np.array([1, 2])) is not None


REUSED = '''
def mask_iou(pred, target):
    return ((pred & target).sum() / (pred | target).sum()).item()


buf = torch.zeros(200, 8, 8, dtype=torch.bool)
model.eval()
with torch.no_grad():
    for start in (0, 200, 400):
        buf.copy_(x[start:start + 200].reshape(-1, 8, 8) > 0.3)   # one buffer, refilled for every batch
        pred = x[start:start + 200].reshape(-1, 8, 8) * (1 + 0.3 * model(x[start:start + 200])[:, :1, None].tanh()) > 0.35
        print("IoU", mask_iou(pred, buf))
'''


def test_a_correct_iou_whose_target_buffer_is_refilled_after_its_call_is_quiet(tmp_path):
    # the first call's masks are copied when it is recorded: the buffer refilled later is not what it scored
    assert _run(tmp_path, REUSED) == []
