"""A segmentation mean IoU that scores a class absent from both the prediction and the target as 0:
every image that lacks some classes is penalised for them, so even perfect masks report a low mean
IoU and the number says little about the model.

Source: Lightning-AI/pytorch-lightning#3097 (https://github.com/Lightning-AI/pytorch-lightning/issues/3097),
"IoU metric returns 0 score for classes not present in prediction or target": "The `iou` metric
implementation always returns a score of 0 for a class that is not present in either the prediction
or the target. This can lead to a deflated score even for perfectly-predicted examples ... The IoU
score should be 1.0 (perfect), but the actual score will be deflated (0.67)" (fixed in #3098).  Here
a per-pixel classifier segments synthetic 12x12 images of four classes, each image holding the
background and one or two of the three object classes; the mean IoU is computed per image over the
four classes and averaged; the buggy metric counts a class absent from both masks as 0, the twin
leaves it out of that image's mean.

Metric: the reported validation mean IoU (plain ``python``, CPU, seed 0): bug 0.5409, twin 0.6553.
"""

REPORT = "N87"
MECHANISM = "metric-absent-class-scored-zero"
SLUGS = ()
METRIC = ("reported_val_miou", 0.5409, 0.6553)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
C, S = 4, 12


def scenes(n, seed):
    g = torch.Generator().manual_seed(seed)
    masks = torch.zeros(n, S, S, dtype=torch.long)
    for i in range(n):
        for c in torch.randperm(3, generator=g)[:torch.randint(1, 3, (1,), generator=g).item()]:
            r, q = torch.randint(0, S - 4, (2,), generator=g)
            masks[i, r:r + 4, q:q + 4] = c + 1
    colours = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    images = colours[masks] + 0.3 * torch.randn(n, S, S, 3, generator=g)
    return images, masks


def mean_iou(pred, target):
    scores = []
    for p, t in zip(pred, target):
        per_class = []
        for c in range(C):
            inter = ((p == c) & (t == c)).sum().item()
            union = ((p == c) | (t == c)).sum().item()
            if union == 0:
__ABSENT__
            else:
                per_class.append(inter / union)
        scores.append(sum(per_class) / len(per_class))
    return sum(scores) / len(scores)


model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, C))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
images, masks = scenes(300, seed=1)
for step in range(200):
    opt.zero_grad()
    F.cross_entropy(model(images).flatten(0, 2), masks.flatten()).backward()
    opt.step()

model.eval()
val_images, val_masks = scenes(100, seed=2)
with torch.no_grad():
    pred = model(val_images).argmax(-1)
print(f"METRIC {mean_iou(pred, val_masks):.4f}")
'''

_BUG = "                per_class.append(0.0)                     # absent from both: scored as a miss"
_FIX = "                continue                                  # absent from both: not scored"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ABSENT__", _BUG if bug else _FIX)
