"""Non-maximum suppression whose intersection takes the larger of the two lower-right corners (``np.maximum``) where
it must take the smaller: every overlap is overestimated, even boxes that do not touch get a positive
"intersection", and correct detections of neighbouring objects are suppressed -- with no error.

Source: jwyang/faster-rcnn.pytorch#151 (https://github.com/jwyang/faster-rcnn.pytorch/issues/151), the CPU NMS
computes ``xx2 = np.maximum(x2[i], x2[order[1:]])`` and ``yy2 = np.maximum(y2[i], y2[order[1:]])``; maintainer:
"you are right, already fixed". Here a small scorer (an MLP on each proposal's noisy agreement features) is
trained to tell proposals that cover an object from background proposals, on synthetic scenes of 2 to 6 boxes
close to each other; at test the scored proposals go through NMS at IoU 0.5 and the recall of the objects (a kept
proposal with IoU at least 0.5) is measured. The buggy NMS uses ``np.maximum`` for the lower-right corner, the
twin ``np.minimum``. The reproduction has no image backbone: the proposals' features stand in for the detector's.

Metric: test recall at IoU 0.5 after NMS (plain ``python``, CPU, seed 0): bug 0.3777, twin 0.9947
"""

REPORT = "N263"
MECHANISM = "nms-intersection-from-outer-corners"
SLUGS = ()
METRIC = ("test_recall", 0.3777, 0.9947)

_SCRIPT = '''import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)


def box_iou(a, b):
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda z: (z[:, 2] - z[:, 0]) * (z[:, 3] - z[:, 1])
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def scene():
    k = np.random.randint(2, 7)
    xy = np.random.rand(k, 2) * 60
    wh = 10 + 10 * np.random.rand(k, 2)
    gt = np.concatenate([xy, xy + wh], 1)
    jit = gt[np.random.randint(0, k, 40)] + np.random.randn(40, 4) * 3
    bg = np.random.rand(40, 2) * 70
    bg = np.concatenate([bg, bg + 8 + 12 * np.random.rand(40, 2)], 1)
    props = np.concatenate([jit, bg])
    props[:, 2:] = np.maximum(props[:, 2:], props[:, :2] + 1)
    best = box_iou(props, gt).max(1)
    feats = np.stack([best + 0.15 * np.random.randn(len(props)) for _ in range(4)], 1)
    return gt, props, feats, best


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
        xx2 = __CORNER__(x2[i], x2[order[1:]])
        yy2 = __CORNER__(y2[i], y2[order[1:]])
        w = np.maximum(0.0, xx2 - xx1)
        h = np.maximum(0.0, yy2 - yy1)
        inter = w * h
        ovr = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[1:][ovr <= thresh]
    return np.array(keep)


train = [scene() for _ in range(200)]
x_tr = torch.tensor(np.concatenate([s[2] for s in train]), dtype=torch.float32)
y_tr = torch.tensor(np.concatenate([s[3] for s in train]) >= 0.5, dtype=torch.float32)
model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    i = torch.randint(0, len(x_tr), (256,))
    loss = F.binary_cross_entropy_with_logits(model(x_tr[i]).squeeze(1), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
found = total = 0
with torch.no_grad():
    for _ in range(100):
        gt, props, feats, _ = scene()
        scores = model(torch.tensor(feats, dtype=torch.float32)).squeeze(1).numpy()
        kept = props[nms(props, scores)]
        found += int((box_iou(gt, kept).max(1) >= 0.5).sum())
        total += len(gt)
print(f"METRIC {found / total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CORNER__', 'np.maximum' if bug else 'np.minimum')
