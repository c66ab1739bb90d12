"""A one-anchor detector whose confidence head is trained towards the IoU between the anchor and the ground truth
instead of the IoU between the predicted box and the ground truth: the confidence learns how well the prior box
fits, which says nothing about how good the predicted box is, so ranking detections by confidence no longer puts the
accurate boxes first and the average precision falls -- nothing fails.

Source: longcw/yolo2-pytorch#19 (https://github.com/longcw/yolo2-pytorch/issues/19), "ground truth value for iou":
"In the code, the ground truth value for iou prediction is the iou between the anchor and the ground truth box ... the
paper says that \" the objectness prediction still predicts the IOU of the ground truth and the proposed box ...\". In
my understanding the \"proposed box\" here is the predicted box, not the anchor box."; maintainer: "Thank you for
pointing out this. I read the darknet code again and think that you are right ... I will fix this" (fixed at
edda7d48). Here 1-D signals hold one box (a plateau of random centre and width) under noise whose level varies per
sample; an MLP predicts the box from one anchor (offsets as in YOLO) and a confidence trained with the squared error
towards an IoU target; the bug's target is ``iou(anchor, gt)``, the twin's ``iou(predicted box (detached), gt)``.
The reproduction replaces images, the grid of cells and five anchors by 1-D signals and one anchor, and evaluates the
confidence by ranking.

Metric: average precision of the 1000 test detections ranked by confidence, a hit being IoU >= 0.75 with the ground
truth (plain ``python``, CPU, seed 0): bug 0.7659, twin 0.9308
"""

REPORT = "N352"
MECHANISM = "objectness-target-from-anchor-not-prediction"
SLUGS = ()
METRIC = ('test_ap75', 0.7659, 0.9308)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
L, ANCHOR_C, ANCHOR_W = 64, 32.0, 12.0


def sample(n):
    c = 20 + 24 * torch.rand(n)
    w = 6 + 14 * torch.rand(n)
    pos = torch.arange(L).float()
    sig = ((pos[None] - c[:, None]).abs() <= w[:, None] / 2).float()
    noise = 0.05 + 1.15 * torch.rand(n, 1)
    return sig + noise * torch.randn(n, L), torch.stack([c, w], 1)


def iou_1d(a, b):
    lo = torch.maximum(a[:, 0] - a[:, 1] / 2, b[:, 0] - b[:, 1] / 2)
    hi = torch.minimum(a[:, 0] + a[:, 1] / 2, b[:, 0] + b[:, 1] / 2)
    inter = (hi - lo).clamp(min=0)
    return inter / (a[:, 1] + b[:, 1] - inter)


def decode(out):
    return torch.stack([ANCHOR_C + 8 * out[:, 0], ANCHOR_W * out[:, 1].exp()], 1)


model = nn.Sequential(nn.Linear(L, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
anchor = torch.tensor([[ANCHOR_C, ANCHOR_W]])
for step in range(1500):
    x, gt = sample(64)
    out = model(x)
    t_box = torch.stack([(gt[:, 0] - ANCHOR_C) / 8, (gt[:, 1] / ANCHOR_W).log()], 1)
    box_loss = F.mse_loss(out[:, :2], t_box)
__TARGET__    conf_loss = F.mse_loss(torch.sigmoid(out[:, 2]), iou_target)
    loss = box_loss + conf_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.manual_seed(1)
x, gt = sample(1000)
with torch.no_grad():
    out = model(x)
hit = (iou_1d(decode(out), gt) >= 0.75).float()
order = torch.sigmoid(out[:, 2]).argsort(descending=True)
hit = hit[order]
precision = hit.cumsum(0) / torch.arange(1, len(hit) + 1)
ap = (precision * hit).sum() / hit.sum()
print(f"METRIC {ap.item():.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__TARGET__', '    iou_target = iou_1d(anchor.expand(len(gt), 2), gt)\n' if bug
                  else '    iou_target = iou_1d(decode(out).detach(), gt)\n')
    return s
