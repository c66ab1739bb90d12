"""A soft Dice loss whose sums run over every dimension, the class dimension included: with softmax
outputs and one-hot targets the pooled ratio is dominated by the background, the network lowers the
loss by predicting background everywhere, and the small classes are never segmented -- with no error.

Source: fastai/fastai#3439 (https://github.com/fastai/fastai/pull/3439), "Bugfix for DiceLoss": "When I
was using it, the network achieved a very low loss, but it was not learning to do proper segmentation.
Basically everything was predicted to be "background class". I read the code and found that the current
implementation sums over all dimensions (batch_dimension, class_dimension, image_width, image_height).
However it shall only sum over the dimensions image_width and image_height. It should take the mean over
the class_dimension! Otherwise it is not working properly, especially in case of class imbalance."
(merged; "@thomasfermi this is looking great!").  Here a small fully convolutional net segments noisy
24 x 24 images with one small square of class 1 and one of class 2 on a background (class 0), trained
with a soft Dice loss only.  The buggy loss computes ``2 * (p * t).sum() / (p.sum() + t.sum())`` over
the whole batch tensor; the twin sums over height and width and averages the per-image, per-class Dice.

Metric: mean IoU of classes 1 and 2 on 200 held-out images (plain ``python``, CPU, seed 0): bug 0.0,
twin 0.6973
"""

REPORT = "N173"
MECHANISM = "dice-pooled-over-classes"
SLUGS = ()
METRIC = ("val_mean_iou", 0.0, 0.6973)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)


def make(n):
    """Noisy images with one small square of class 1 (brighter) and one of class 2 (darker)."""
    x = torch.randn(n, 1, 24, 24, generator=g) * 0.8
    y = torch.zeros(n, 24, 24, dtype=torch.long)
    for i in range(n):
        for c in (1, 2):
            s = int(torch.randint(4, 8, (1,), generator=g))
            r, q = torch.randint(0, 24 - s, (2,), generator=g).tolist()
            y[i, r:r + s, q:q + s] = c
    x = x + (y == 1).float().unsqueeze(1) - (y == 2).float().unsqueeze(1)
    return x, y


def dice_loss(logits, y):
    p = logits.softmax(1)
    t = F.one_hot(y, 3).permute(0, 3, 1, 2).float()
__DICE__


x_train, y_train = make(400)
x_val, y_val = make(200)
model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(16, 3, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(25):
    for i in range(0, 400, 20):
        loss = dice_loss(model(x_train[i:i + 20]), y_train[i:i + 20])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    pred = model(x_val).argmax(1)
ious = []
for c in (1, 2):
    inter = ((pred == c) & (y_val == c)).sum().item()
    union = ((pred == c) | (y_val == c)).sum().item()
    ious.append(inter / max(union, 1))
print(f"METRIC {sum(ious) / 2:.4f}")
'''

_BUG = """    inter = (p * t).sum()
    den = p.sum() + t.sum()
    return 1 - 2 * inter / (den + 1e-6)"""
_TWIN = """    inter = (p * t).sum((2, 3))
    den = p.sum((2, 3)) + t.sum((2, 3))
    return (1 - 2 * inter / (den + 1e-6)).mean()"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DICE__", _BUG if bug else _TWIN)
