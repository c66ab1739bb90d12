"""A ReliefF feature selector whose pre-normalisation subtracts each feature's minimum and divides by its range
along a row (``x[idx]`` is a sample) instead of a column: the features keep their raw scales, the one feature
measured in large units dominates the distances, the nearest hits and misses are found by it alone, and the
interacting features that ReliefF exists to find are not selected -- with no error.

Source: EpistasisLab/scikit-rebate#19 (https://github.com/EpistasisLab/scikit-rebate/issues/19), "Bug with
pre_normalize with no missing values for continous data": "``x[idx] -= cmin; x[idx] /= diff`` is not correct.
Because ``x[idx]`` here is a sample, what we need is a feature." (labels: bug); maintainer's fix (#20, merged):
"The `pre_normalize` function was normalizing based on rows rather than columns. This change fixes that." Here
ReliefF is written in torch (Manhattan distances on the pre-normalised features, as the library's distance
array; ten nearest hits and misses; per-feature differences scaled by the range) on synthetic data: the class is
the XOR of the signs of two features, with eight noise features, one of them in units a thousand times larger;
the four best-scored features feed a small MLP. The bug normalises ``x[idx]``, the twin ``x[:, idx]``. The reproduction
replaces the genetics data by the synthetic XOR.

Metric: test accuracy of the MLP on the selected features (plain ``python``, CPU, seed 0): bug 0.4650, twin
0.9900
"""

REPORT = "N328"
MECHANISM = "feature-normalisation-applied-along-rows"
SLUGS = ()
METRIC = ("test_accuracy", 0.4650, 0.9900)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N, FEAT, K, TOP = 1200, 10, 10, 4
X = torch.rand(N, FEAT) * 2 - 1
X[:, 9] *= 1000
y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).long()
Xtr, ytr, Xte, yte = X[:800], y[:800], X[800:], y[800:]


def pre_normalize(x, attr):
    x = x.clone()
    for idx, (cmin, diff) in enumerate(attr):
        __NORM__
    return x


def relieff(x, y):
    cmin, cmax = x.min(0).values, x.max(0).values
    rng = cmax - cmin
    dist = torch.cdist(pre_normalize(x, list(zip(cmin, rng))), pre_normalize(x, list(zip(cmin, rng))), p=1)
    dist.fill_diagonal_(float("inf"))
    scores = torch.zeros(x.size(1))
    for i in range(len(x)):
        same = y == y[i]
        hits = dist[i].masked_fill(~same, float("inf")).topk(K, largest=False).indices
        misses = dist[i].masked_fill(same, float("inf")).topk(K, largest=False).indices
        scores += ((x[misses] - x[i]).abs().mean(0) - (x[hits] - x[i]).abs().mean(0)) / rng
    return scores / len(x)


selected = relieff(Xtr, ytr).topk(TOP).indices
model = nn.Sequential(nn.Linear(TOP, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
mu, sd = Xtr[:, selected].mean(0), Xtr[:, selected].std(0)
for epoch in range(60):
    for i in torch.randperm(len(Xtr)).split(64):
        loss = F.cross_entropy(model((Xtr[i][:, selected] - mu) / sd), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    acc = (model((Xte[:, selected] - mu) / sd).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    norm = "x[idx] -= cmin\n        x[idx] /= diff" if bug else "x[:, idx] -= cmin\n        x[:, idx] /= diff"
    return _SCRIPT.replace('__NORM__', norm)
