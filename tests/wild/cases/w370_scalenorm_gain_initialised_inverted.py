"""A ScaleNorm whose gain starts at ``dim ** -0.5`` instead of ``dim ** 0.5``: ScaleNorm divides by the vector's norm
and multiplies by the gain, so every normalised vector starts with norm ``1 / sqrt(dim)`` (elements of about ``1 /
dim``) instead of elements of about one; the blocks and the classifier see nearly zero inputs, and the one scalar
gain has to grow a hundredfold through the optimiser before the network trains at its normal pace.

Source: lucidrains/x-transformers#246 (https://github.com/lucidrains/x-transformers/issues/246): the ScaleNorm gain
``g`` is initialised as ``torch.ones(1) * (dim ** -0.5)`` where the ScaleNorm paper's ``sqrt(d)`` means ``dim ** 0.5``;
maintainer: "thank you for catching this! indeed the sign was not correct" (fixed). Here a residual MLP of width 128
with three pre-norm blocks and a final ScaleNorm before the classifier trains on digits for five epochs with Adam; the
bug initialises ``g`` to ``dim ** -0.5``, the twin to ``dim ** 0.5``. The reproduction replaces the transformer's
attention blocks by feed-forward blocks.

Metric: test cross-entropy after five epochs (plain ``python``, CPU, seed 0; lower is better): bug 2.0430, twin 0.1454
"""

REPORT = "N344"
MECHANISM = "scalenorm-gain-initialised-with-inverse-sqrt-dim"
SLUGS = ()
METRIC = ('test_nll', 2.043, 0.1454)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1400], perm[1400:]
D = 128


class ScaleNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.g = nn.Parameter(torch.ones(1) * __INIT__)

    def forward(self, x):
        norm = torch.norm(x, dim=-1, keepdim=True)
        return x / norm.clamp(min=self.eps) * self.g


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = ScaleNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x):
        return x + self.ff(self.norm(x))


model = nn.Sequential(nn.Linear(64, D), Block(), Block(), Block(), ScaleNorm(D), nn.Linear(D, 10))
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
    nll = F.cross_entropy(model(X[te]), y[te]).item()
print(f"METRIC {nll:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__INIT__', 'dim ** -0.5' if bug
                           else 'dim ** 0.5')
