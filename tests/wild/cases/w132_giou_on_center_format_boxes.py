"""A generalised-IoU box loss given boxes in centre format (cx, cy, w, h) when it reads corners
(x1, y1, x2, y2): the loss compares the wrong rectangles -- often "boxes" whose second corner lies
before the first -- and the regressor learns boxes that overlap the objects poorly -- with no
error.

Source: stevebottos/owl-vit-object-detection#14 (https://github.com/stevebottos/owl-vit-object-detection/issues/14),
"Box coordinate bug": "happened to notice this in losses.py. generalized_box_iou() expects the
bounding boxes in xyxy format, but cxcywh boxes are passed in."; maintainer: "Good catch, I'll look
into that."  Here a small network regresses the box of one bright rectangle on a noisy 16x16 image,
predicting (cx, cy, w, h) in [0, 1] like the report's model, trained with a
generalised-IoU loss written as torchvision's (corner boxes, no check).  The buggy loss receives the
centre-format boxes; the twin converts prediction and target to corners first.

Metric: mean IoU of the predicted boxes on validation images (plain ``python``, CPU, seed 0): bug
0.0669, twin 0.6007.
"""

REPORT = "N106"
MECHANISM = "box-format-mismatch-in-loss"
SLUGS = ()
METRIC = ("val_mean_iou", 0.0669, 0.6007)

_SCRIPT = '''
import torch
from torch import nn


def cxcywh_to_xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)


def xyxy_to_cxcywh(b):
    x1, y1, x2, y2 = b.unbind(-1)
    return torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], -1)


def iou_and_giou(b1, b2):  # matching rows of two (x1, y1, x2, y2) box sets, as torchvision computes them
    area1 = (b1[:, 2] - b1[:, 0]) * (b1[:, 3] - b1[:, 1])
    area2 = (b2[:, 2] - b2[:, 0]) * (b2[:, 3] - b2[:, 1])
    wh = (torch.min(b1[:, 2:], b2[:, 2:]) - torch.max(b1[:, :2], b2[:, :2])).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    union = area1 + area2 - inter
    iou = inter / (union + 1e-7)
    wh_c = (torch.max(b1[:, 2:], b2[:, 2:]) - torch.min(b1[:, :2], b2[:, :2])).clamp(min=0)
    area_c = wh_c[:, 0] * wh_c[:, 1]
    return iou, iou - (area_c - union) / (area_c + 1e-7)


def generalized_box_iou_loss(b1, b2):
    return (1 - iou_and_giou(b1, b2)[1]).mean()


torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, S = 3000, 16
x1 = torch.randint(0, S - 3, (N,), generator=g)
y1 = torch.randint(0, S - 3, (N,), generator=g)
w = torch.minimum(torch.randint(2, 7, (N,), generator=g), S - x1)
h = torch.minimum(torch.randint(2, 7, (N,), generator=g), S - y1)
images = 0.3 * torch.randn(N, S, S, generator=g)
for k in range(N):
    images[k, y1[k]:y1[k] + h[k], x1[k]:x1[k] + w[k]] += 1.0
corners = torch.stack([x1, y1, x1 + w, y1 + h], 1).float() / S
boxes = xyxy_to_cxcywh(corners)  # targets in centre format, as the model predicts them

model = nn.Sequential(nn.Unflatten(1, (1, S)), nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(16 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 4), nn.Sigmoid())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(10):
    for batch in torch.randperm(2500).split(64):
        pred = model(images[batch])
        opt.zero_grad()
        __LOSS__.backward()
        opt.step()

with torch.no_grad():
    iou = iou_and_giou(cxcywh_to_xyxy(model(images[2500:])), corners[2500:])[0].mean().item()
print(f"METRIC {iou:.4f}")
'''

_BUG = "generalized_box_iou_loss(pred, boxes[batch])"
_TWIN = "generalized_box_iou_loss(cxcywh_to_xyxy(pred), cxcywh_to_xyxy(boxes[batch]))"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LOSS__", _BUG if bug else _TWIN)
