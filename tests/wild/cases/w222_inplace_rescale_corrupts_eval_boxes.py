"""Predictions rescaled to the original image in place while saving them, before the metric reads them:
``pred`` is a view of the batch output, ``scale_coords`` writes the letterbox-to-original mapping into it, and
the IoU matching that follows compares boxes in original-image coordinates with labels in letterbox
coordinates -- the reported accuracy collapses whenever the images were padded, with no error.

Source: WongKinYiu/ScaledYOLOv4#326 (https://github.com/WongKinYiu/ScaledYOLOv4/issues/326), "Erroneous mAP
result from test.py with --save-txt when padding != 0.": "It seems that line 128 of test.py `pred[:, :4] =
scale_coords(img[si].shape[1:], pred[:, :4], shapes[si][0], shapes[si][1])  # to original` changes the
`output` variable when there is a padding, thus affecting the upcoming metric calculation. Fix: Make a local
copy or something."  Here a small network regresses the box of one bright rectangle in letterboxed 32x32
images (originals of 40-64 pixels a side, padded with grey), and the evaluation saves each prediction in
original coordinates (the ``--save-txt`` branch) and then scores the batch output against the letterboxed
labels.  The buggy loop takes ``pred = output[i]``, the twin ``pred = output[i].clone()``.

Metric: share of test boxes matched at IoU > 0.5 (plain ``python``, CPU, seed 0): bug 0.0033, twin 1.0000
"""

REPORT = "N196"
MECHANISM = "in-place-rescale-of-predictions-before-metric"
SLUGS = ()
METRIC = ("box_hit_rate", 0.0033, 1.0000)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
S = 32


def make(n):
    h0 = torch.randint(40, 65, (n,), generator=g).float()
    w0 = torch.randint(40, 65, (n,), generator=g).float()
    r = S / torch.maximum(h0, w0)
    pad_x, pad_y = (S - w0 * r) / 2, (S - h0 * r) / 2
    x1, y1 = torch.rand(n, generator=g) * w0 * 0.5, torch.rand(n, generator=g) * h0 * 0.5
    x2, y2 = x1 + (0.3 + 0.2 * torch.rand(n, generator=g)) * w0, y1 + (0.3 + 0.2 * torch.rand(n, generator=g)) * h0
    box = torch.stack([x1 * r + pad_x, y1 * r + pad_y, x2 * r + pad_x, y2 * r + pad_y], 1)  # letterbox coords
    grid = torch.arange(S).float() + 0.5
    inside_x = (grid[None] >= pad_x[:, None]) & (grid[None] < S - pad_x[:, None])
    inside_y = (grid[None] >= pad_y[:, None]) & (grid[None] < S - pad_y[:, None])
    img = torch.where(inside_y[:, :, None] & inside_x[:, None, :], 0.0, 0.5)
    rect_x = (grid[None] >= box[:, 0:1]) & (grid[None] < box[:, 2:3])
    rect_y = (grid[None] >= box[:, 1:2]) & (grid[None] < box[:, 3:4])
    img = torch.where(rect_y[:, :, None] & rect_x[:, None, :], 1.0, img)
    return img.reshape(n, S * S), box, torch.stack([r, pad_x, pad_y], 1)


def scale_coords(coords, ratio_pad):
    """Letterbox coordinates to the original image's, in place."""
    r, pad_x, pad_y = ratio_pad
    coords[[0, 2]] -= pad_x
    coords[[1, 3]] -= pad_y
    coords /= r
    return coords


def iou(a, b):
    w = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0])).clamp(min=0)
    h = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1])).clamp(min=0)
    inter = w * h
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])
    return inter / (area(a) + area(b) - inter)


Xtr, Btr, _ = make(2000)
Xte, Bte, Rte = make(300)
model = nn.Sequential(nn.Linear(S * S, 256), nn.ReLU(), nn.Linear(256, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    perm = torch.randperm(2000)
    for i in range(0, 2000, 100):
        b = perm[i:i + 100]
        loss = F.smooth_l1_loss(model(Xtr[b]) * S, Btr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

saved = []
with torch.no_grad():
    output = model(Xte) * S
    for i in range(len(output)):
        pred = __PRED__
        saved.append(scale_coords(pred, Rte[i]).tolist())  # --save-txt: boxes in original coordinates
    hits = (iou(output, Bte) > 0.5).float().mean()
print(f"METRIC {hits.item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PRED__", "output[i]" if bug else "output[i].clone()")
