"""Quantisation-aware training with asymmetric 8-bit weights whose zero point is never set: the integer range is
0-255 and the zero point stays 0, so every negative weight is clamped to 0 in the forward pass, and the
quantised model's accuracy falls to chance -- with no error.

Source: ModelTC/MQBench#180 (https://github.com/ModelTC/MQBench/issues/180), the reporter's LSQ run with
``'symmetry': False`` for the weights: after calibration the accuracy is normal ("大概80+%", about 80+%), "但到感知
量化训练阶段acc就直接降到0了" (but in the quantisation-aware training stage the accuracy drops straight to 0) (labels:
bug); the fix, #189 (merged): "weight的量化参数symmetry设为False时，quant_min=0，通常weight接近0均值高斯分布，因此不满足
该条件分支，zero_point仍为0，量化时weight的整个负数域被截断，精度下降" (with symmetry False for the weights quant_min is
0; weights are roughly zero-mean Gaussian, so the branch is not taken, the zero point stays 0, the whole negative
range of the weights is cut off when quantising, and accuracy drops). Here an MLP is trained on digits in float,
then fine-tuned with LSQ-style learnable fake quantisation of its weights (asymmetric, 0-255, a straight-through
round); the bug leaves the zero point at 0, the twin sets it from the weights' minimum. The reproduction replaces
MQBench's observers and the reporter's network by one fake-quantiser per layer.

Metric: the quantised model's test accuracy (plain ``python``, CPU, seed 0): bug 0.0865, twin 0.9678
"""

REPORT = "N325"
MECHANISM = "asymmetric-quant-zero-point-left-at-zero"
SLUGS = ()
METRIC = ("test_accuracy", 0.0865, 0.9678)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(X))
X, y = X[perm], y[perm]
Xtr, ytr, Xte, yte = X[:1300], y[:1300], X[1300:], y[1300:]


class LearnableFakeQuantize(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.quant_min, self.quant_max = 0, 255
        lo, hi = w.min().item(), w.max().item()
        self.scale = nn.Parameter(torch.tensor((hi - lo) / 255))
        __ZERO_POINT__
        self.register_buffer("zero_point", torch.tensor(zp))

    def forward(self, w):
        v = w / self.scale + self.zero_point
        q = torch.clamp(torch.round(v), self.quant_min, self.quant_max)
        q = v + (q - v).detach()
        return (q - self.zero_point) * self.scale


class QLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, self.wq(self.weight), self.bias)


model = nn.Sequential(QLinear(64, 64), nn.ReLU(), QLinear(64, 10))
for m in model:
    if isinstance(m, QLinear):
        m.wq = nn.Identity()
fopt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(300):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(Xtr[i]), ytr[i])
    fopt.zero_grad()
    loss.backward()
    fopt.step()
for m in model:
    if isinstance(m, QLinear):
        m.wq = LearnableFakeQuantize(m.weight.detach())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(200):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(Xtr[i]), ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(Xte).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ZERO_POINT__', "zp = 0.0" if bug else "zp = float(round(-lo / ((hi - lo) / 255)))")
