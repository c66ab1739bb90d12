"""A segmentation IoU computed as ``2 * I / (I + U)``: the evaluation reports a Dice-like number under the name IoU,
well above the true intersection over union of the same masks -- with no error.

Source: megvii-research/PETR#44 (https://github.com/megvii-research/PETR/issues/44), the BEV segmentation
evaluation of PETRv2 computes its IoU with the intersection counted twice over intersection plus union;
maintainer: "Indeed, there is a silly bug". Here a small convolutional network segments noisy synthetic images (a
bright disc of random centre and radius on a textured background) trained with a per-pixel binary cross-entropy;
the test masks (thresholded at 0.5) are scored by an IoU like the repository's: the buggy one returns ``2 * I / (I
+ U)``, the twin ``I / U``. The training is the same in both; only the reported number differs.

Metric: the reported test IoU (plain ``python``, CPU, seed 0): bug 0.6644, twin 0.4974
"""

REPORT = "N254"
MECHANISM = "iou-intersection-counted-twice"
SLUGS = ()
METRIC = ("test_iou", 0.6644, 0.4974)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
S = 24


def images(n):
    yy, xx = torch.meshgrid(torch.arange(S), torch.arange(S), indexing="ij")
    c = 4 + (S - 8) * torch.rand(n, 2)
    r = 2.5 + 3.5 * torch.rand(n)
    d = ((yy[None] - c[:, 0, None, None]) ** 2 + (xx[None] - c[:, 1, None, None]) ** 2).sqrt()
    mask = (d < r[:, None, None]).float()
    x = 0.8 * mask + 0.9 * torch.randn(n, S, S)
    return x[:, None], mask[:, None]


x_tr, m_tr = images(800)
x_te, m_te = images(300)


def iou(pred, target):
    inter = (pred * target).sum()
    union = ((pred + target) > 0).float().sum()
    return (__IOU__).item()


model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(16, 1, 3, padding=1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(150):
    i = torch.randint(0, len(x_tr), (32,))
    loss = F.binary_cross_entropy_with_logits(model(x_tr[i]), m_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = (model(x_te).sigmoid() > 0.5).float()
print(f"METRIC {iou(pred, m_te):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__IOU__', '2 * inter / (inter + union)' if bug else 'inter / union')
