"""A residual block that returns its branch ``out`` instead of ``out + x``: the skip connection is lost, a stack of such
blocks is a plain deep network of twice their number of layers, and it trains far slower than the residual network it
was meant to be -- with no error and a falling loss.

Source: znxlwm/UGATIT-pytorch#32 (https://github.com/znxlwm/UGATIT-pytorch/issues/32): ``ResnetAdaILNBlock.forward``
ends with ``return out`` where the residual block should return ``out + x``; maintainer: "Thanks!" (fixed). Here a
classifier of twelve residual blocks (linear, LayerNorm, ReLU, linear, LayerNorm, as the generator's blocks are
convolution, AdaILN, ReLU, convolution, AdaILN) trains on digits for three epochs; the bug returns ``out``, the twin
``out + x``. The reproduction replaces the image-to-image generator, its convolutions and AdaILN by the classifier,
linear layers and LayerNorm, and stacks twelve blocks where UGATIT's decoder has a few, so that depth shows in seconds.

Metric: test accuracy after three epochs (plain ``python``, CPU, seed 0): bug 0.4937, twin 0.9547
"""

REPORT = "N337"
MECHANISM = "residual-block-returns-branch-without-skip"
SLUGS = ()
METRIC = ('test_accuracy', 0.4937, 0.9547)

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
D = 64


class ResnetBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm1 = nn.Linear(D, D), nn.LayerNorm(D)
        self.fc2, self.norm2 = nn.Linear(D, D), nn.LayerNorm(D)

    def forward(self, x):
        out = torch.relu(self.norm1(self.fc1(x)))
        out = self.norm2(self.fc2(out))
        __RETURN__


model = nn.Sequential(nn.Linear(64, D), *[ResnetBlock() for _ in range(12)], nn.Linear(D, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(3):
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
    return _SCRIPT.replace('__RETURN__', 'return out' if bug
                           else 'return out + x')
