"""An evaluation IoU written for integer pixel boxes (``x2 - x1 + 1``) applied to boxes normalised to
``[0, 1]``: the ``+ 1`` is as large as the whole image, every box overlaps every other almost
completely, and the reported hit rate of a mediocre box regressor is close to perfect -- with no
error.

Source: Cartucho/mAP#153 (https://github.com/Cartucho/mAP/issues/153), "Incorrect mAP when boxes are
normalized to [0-1]": "I check your code and see that you ``+ 1`` for intersection width and height
... it leads to a significant shift if I measure the results at different scales (image
resolution)".  Here a small CNN regresses the normalised corners of one bright rectangle in noisy
16x16 images; the evaluation counts a prediction as a hit when its IoU with the true box is at least
0.75.  The buggy IoU adds 1 to every width and height (the pixel convention), the twin does not.

Metric: the reported hit rate at IoU 0.75 on 500 held-out images (plain ``python``, CPU, seed 0):
bug 0.978, twin 0.202 (the bug reads better: the twin is the real hit rate).
"""

REPORT = "N130"
MECHANISM = "pixel-iou-on-normalized-boxes"
SLUGS = ()
METRIC = ("reported_hit_rate_at_iou_075", 0.978, 0.202)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)


def make(n):
    images = torch.rand(n, 1, 16, 16, generator=g) * 0.3
    boxes = torch.zeros(n, 4)
    for i in range(n):
        x1, y1 = torch.randint(0, 10, (2,), generator=g).tolist()
        w, h = torch.randint(3, 7, (2,), generator=g).tolist()
        images[i, 0, y1:y1 + h, x1:x1 + w] += 0.7
        boxes[i] = torch.tensor([x1, y1, x1 + w, y1 + h]) / 16.0
    return images, boxes


def iou(a, b):
    pad = __PAD__
    iw = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0]) + pad).clamp(min=0)
    ih = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1]) + pad).clamp(min=0)
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0] + pad) * (a[:, 3] - a[:, 1] + pad)
    area_b = (b[:, 2] - b[:, 0] + pad) * (b[:, 3] - b[:, 1] + pad)
    return inter / (area_a + area_b - inter)


x_train, y_train = make(2000)
x_test, y_test = make(500)
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(8 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(6):
    for i in range(0, 2000, 64):
        loss = nn.functional.smooth_l1_loss(model(x_train[i:i + 64]), y_train[i:i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    hits = (iou(model(x_test), y_test) >= 0.75).float().mean().item()
print(f"METRIC {hits:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PAD__", "1.0" if bug else "0.0")
