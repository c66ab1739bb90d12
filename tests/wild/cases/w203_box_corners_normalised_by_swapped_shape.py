"""Predicted box corners normalised by the image size with the axes swapped: x is divided by the
image height and y by its width, so on non-square images every normalised box is stretched and shifted,
and a detector scored against normalised labels looks broken -- with no error.

Source: ultralytics/ultralytics#8249 (https://github.com/ultralytics/ultralytics/pull/8249), "Fix
xyxyxyxyn calculation, swap axis": "Instead of `xyxyxyxyn[..., 0] /= self.orig_shape[0]`
`xyxyxyxyn[..., 1] /= self.orig_shape[1]` the image axes have been swapped to `xyxyxyxyn[..., 0] /=
self.orig_shape[1]` `xyxyxyxyn[..., 1] /= self.orig_shape[0]` This should fix the scaling issue in
#8149" (merged; "The horizontal (x) coordinates of the bounding boxes are now correctly normalized by the
width of the original image instead of its height, and vice versa").  Here a small CNN regresses the
box of one bright rectangle in noisy 16 x 32 images (pixels, trained correctly); evaluation turns its
prediction into four corners, normalises them with ``orig_shape = (height, width)`` as the results
object does, and compares them with the normalised labels.  The buggy normalisation divides x by
``orig_shape[0]``, the twin by ``orig_shape[1]`` (and y the other way round).

Metric: share of 500 held-out images whose normalised predicted box has IoU > 0.5 with the normalised
label (plain ``python``, CPU, seed 0): bug 0.0, twin 0.942
"""

REPORT = "N177"
MECHANISM = "box-normalised-by-swapped-image-axes"
SLUGS = ()
METRIC = ("val_hit_rate", 0.0, 0.942)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
H, W = 16, 32


def make(n):
    """Noisy images with one bright rectangle; labels (x1, y1, x2, y2) in pixels."""
    x = 0.3 * torch.randn(n, 1, H, W, generator=g)
    boxes = torch.zeros(n, 4)
    for i in range(n):
        w, h = int(torch.randint(6, 14, (1,), generator=g)), int(torch.randint(4, 9, (1,), generator=g))
        x0 = int(torch.randint(0, W - w + 1, (1,), generator=g))
        y0 = int(torch.randint(0, H - h + 1, (1,), generator=g))
        x[i, 0, y0:y0 + h, x0:x0 + w] += 1.0
        boxes[i] = torch.tensor([x0, y0, x0 + w, y0 + h], dtype=torch.float)
    return x, boxes


def xyxyxyxyn(xyxy, orig_shape):
    """Four corners of each box, normalised by the image size (orig_shape = (height, width))."""
    x1, y1, x2, y2 = xyxy.unbind(1)
    corners = torch.stack([torch.stack([x1, y1], 1), torch.stack([x2, y1], 1),
                           torch.stack([x2, y2], 1), torch.stack([x1, y2], 1)], 1)
    corners = corners.clone()
__NORM__
    return corners


def iou(a, b):
    lt, rb = torch.max(a[:, :2], b[:, :2]), torch.min(a[:, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(1)
    area = lambda z: (z[:, 2:] - z[:, :2]).clamp(min=0).prod(1)
    return inter / (area(a) + area(b) - inter)


x_train, box_train = make(2000)
x_val, box_val = make(500)
model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 8, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(8):
    perm = torch.randperm(2000)
    for i in range(0, 2000, 50):
        idx = perm[i:i + 50]
        loss = F.smooth_l1_loss(model(x_train[idx]), box_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    pred = model(x_val)
corners = xyxyxyxyn(pred, (H, W))
pred_n = torch.cat([corners.min(1).values, corners.max(1).values], 1)
label_n = box_val / torch.tensor([W, H, W, H], dtype=torch.float)
print(f"METRIC {(iou(pred_n, label_n) > 0.5).float().mean():.4f}")
'''

_BUG = """    corners[..., 0] /= orig_shape[0]
    corners[..., 1] /= orig_shape[1]"""
_TWIN = """    corners[..., 0] /= orig_shape[1]
    corners[..., 1] /= orig_shape[0]"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__NORM__", _BUG if bug else _TWIN)
