"""A segmentation IoU with an ignored class that drops the class's own score but keeps its pixels in the confusion
matrix: every pixel whose target is the ignored class and whose prediction is a real class still counts in that
class's union, so a model trained with ``ignore_index`` (which never learns what to predict there) is reported far
worse than it is.

Source: Lightning-AI/torchmetrics#312 (https://github.com/Lightning-AI/torchmetrics/issues/312): with ``ignore_index``
the ignored class's score is removed from the per-class scores after they are computed, while the ignored pixels are
still counted in the confusion matrix, so the other classes' unions are too large (the report: 0.1250 where 0.1667 was
expected; labels: bug; fixed by #328, merged). Here a three-layer convolutional net segments synthetic images
(background class 0, rectangles of classes 1-3 told apart by their brightness), trained with ``cross_entropy(...,
ignore_index=0)``, and is evaluated with a hand-written IoU from a confusion matrix; the bug only drops the ignored
class's score, the twin also zeroes the ignored class's row of the confusion matrix first. The reproduction replaces
torchmetrics' class by the few lines that compute it.

Metric: mean IoU of the three real classes on 200 new images (plain ``python``, CPU, seed 0; the bug under-reports): bug
0.6098, twin 0.9159
"""

REPORT = "N335"
MECHANISM = "ignored-class-score-dropped-but-pixels-kept"
SLUGS = ()
METRIC = ('test_mean_iou', 0.6098, 0.9159)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
K, IGNORE = 4, 0


def batch(n):
    x = 0.3 * torch.randn(n, 1, 16, 16)
    y = torch.zeros(n, 16, 16, dtype=torch.long)
    for j in range(n):
        for _ in range(2):
            k = int(torch.randint(1, K, ()))
            r, c = torch.randint(0, 11, (2,)).tolist()
            h, w = torch.randint(3, 6, (2,)).tolist()
            x[j, 0, r:r + h, c:c + w] += k
            y[j, r:r + h, c:c + w] = k
    return x, y


def iou(pred, target):
    conf = torch.bincount(target.flatten() * K + pred.flatten(), minlength=K * K).reshape(K, K).float()
    __CONF__
    inter = conf.diag()
    union = conf.sum(0) + conf.sum(1) - inter
    scores = inter / union
    return torch.cat([scores[:IGNORE], scores[IGNORE + 1:]]).mean().item()


model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(16, K, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(200):
    x, y = batch(32)
    loss = F.cross_entropy(model(x), y, ignore_index=IGNORE)
    opt.zero_grad()
    loss.backward()
    opt.step()
x, y = batch(200)
with torch.no_grad():
    pred = model(x).argmax(1)
print(f"METRIC {iou(pred, y):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('    __CONF__\n', '' if bug
                           else '    conf[IGNORE] = 0\n')
