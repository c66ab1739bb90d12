"""An expected calibration error that averages the bins' gaps between accuracy and confidence without weighting
them by how many predictions fall in each bin: a handful of predictions in a sparse low-confidence bin count as much
as the thousands in the top bin, so the reported calibration error is far from the model's -- with no error.

Source: ethen8181/machine-learning#20 (https://github.com/ethen8181/machine-learning/issues/20): the notebook's
ECE summed ``abs(accuracy - confidence)`` over the bins and divided by the number of bins, where the definition
weights each bin by its share of the predictions; maintainer: "makes total sense" (fixed by #21, merged). Here an
MLP is trained to overconfidence on 4 overlapping classes and its test ECE over 15 bins is computed as in the
notebook (bug) or weighted by the bins' counts (twin). The notebook's models and data are replaced by the MLP.

Metric: the reported test ECE (plain ``python``, CPU, seed 0): bug 0.1032, twin 0.1844 (the twin's is the
model's calibration error)
"""

REPORT = "N293"
MECHANISM = "calibration-bins-averaged-unweighted"
SLUGS = ()
METRIC = ("test_ece", 0.1032, 0.1844)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
CLASSES, BINS = 4, 15
centres = torch.randn(CLASSES, 2)


def batch(n):
    y = torch.randint(0, CLASSES, (n,))
    return centres[y] + 0.8 * torch.randn(n, 2), y


x_train, y_train = batch(200)
model = nn.Sequential(nn.Linear(2, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(600):
    loss = F.cross_entropy(model(x_train), y_train)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, y = batch(5000)
    conf, pred = F.softmax(model(x), 1).max(1)
    correct = (pred == y).float()
    edges = torch.linspace(0, 1, BINS + 1)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            gap = (correct[inside].mean() - conf[inside].mean()).abs().item()
            __ADD__
    __FINAL__
print(f"METRIC {ece:.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.replace('__ADD__', 'ece += gap').replace('__FINAL__', 'ece = ece / BINS')
    return _SCRIPT.replace('__ADD__', 'ece += gap * inside.float().mean().item()').replace('__FINAL__', 'pass')
