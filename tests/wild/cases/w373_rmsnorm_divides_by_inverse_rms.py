"""An RMSNorm that divides by ``torch.rsqrt(mean(x²) + eps)`` where it should multiply: dividing by the inverse root
mean square multiplies by the root mean square, so the "normalised" output has the square of the input's scale
instead of unit scale; the pre-norm blocks and the classifier see activations that grow with the residual stream, and
training is slow and unstable, without an error.

Source: mosaicml/llm-foundry#371 (https://github.com/mosaicml/llm-foundry/issues/371): the RMSNorm computes ``x /
torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`` instead of ``x * torch.rsqrt(...)``; the reporter's loss diverges
(labels: bug; fixed by #372, merged: "Nice catch"). Here a residual MLP of width 64 with four pre-norm blocks and a
final RMSNorm before the classifier trains on raw digits (pixel values 0-16) for five epochs; the bug divides, the twin
multiplies. The reproduction replaces the MPT language model by the MLP. (The corpus holds a hand-written LayerNorm that
squares its variance, w321; this is a different slip in a different normaliser.)

Metric: test accuracy after five epochs (plain ``python``, CPU, seed 0): bug 0.6196, twin 0.9647
"""

REPORT = "N347"
MECHANISM = "rmsnorm-divides-by-inverse-rms"
SLUGS = ()
METRIC = ('test_accuracy', 0.6196, 0.9647)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32)
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1400], perm[1400:]
D = 64


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return __NORM__ * self.weight


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = RMSNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x):
        return x + self.ff(self.norm(x))


model = nn.Sequential(nn.Linear(64, D), Block(), Block(), Block(), Block(), RMSNorm(D), nn.Linear(D, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(5):
    p = tr[torch.randperm(len(tr))]
    for i in range(0, len(p), 64):
        loss = F.cross_entropy(model(X[p[i:i + 64]]), y[p[i:i + 64]])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__NORM__', '(x / torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))' if bug
                           else '(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))')
