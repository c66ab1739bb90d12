"""Prediction heads built by multiplying a one-element list (``nn.ModuleList([head] * k)``): the list
holds k references to one module, so every head shares one set of weights and gives the same output,
and heads trained for different targets cannot all be right -- with no error.

Source: linkedin/Liger-Kernel#269 (https://github.com/linkedin/Liger-Kernel/pull/269), "Fix sharing a
ResBlock layer for each head in Medusa example": "There is a bug of incorrect weight sharing between
layers for each Medusa head. Since ``nn.Module`` is Python reference, the original source code
creates a list containing references to the same weights"; reviewer: "Great catch!!!".  Here, as in
Medusa, a shared trunk feeds three heads, each predicting a different target of the same input (the
digit, and two other codes of it, as the next tokens are for a language model); the buggy model
builds its heads with ``[block] * 3``, the twin with one new block per head.

Metric: validation accuracy averaged over the three heads (plain ``python``, CPU, seed 0): bug 0.5,
twin 0.9.
"""

REPORT = "N125"
MECHANISM = "modules-shared-by-list-repetition"
SLUGS = ()
METRIC = ("val_accuracy_mean_over_heads", 0.3678, 0.8892)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
targets = torch.stack([Y, (3 * Y + 1) % 10, (7 * Y + 4) % 10], dim=1)  # three codes of each digit


def res_block(h):
    return nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))


class MultiHead(nn.Module):
    def __init__(self, h=64, heads=3):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(64, h), nn.ReLU())
        self.heads = nn.ModuleList(__HEADS__)

    def forward(self, x):
        z = self.trunk(x)
        return torch.stack([head(z) for head in self.heads], dim=1)  # (batch, heads, classes)


model = MultiHead()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(20):
    order = torch.randperm(1400)
    for i in range(0, 1400, 32):
        b = order[i:i + 32]
        loss = F.cross_entropy(model(X[b]).flatten(0, 1), targets[b].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    acc = (model(X[1400:]).argmax(2) == targets[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    heads = "[res_block(h)] * heads" if bug else "[res_block(h) for _ in range(heads)]"
    return _SCRIPT.replace("__HEADS__", heads)
