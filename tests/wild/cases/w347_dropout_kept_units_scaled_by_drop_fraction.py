"""A hand-written dropout that multiplies the kept units by the fraction of units dropped (about p) instead of
dividing them by the fraction kept: in training the layer's output is shrunk by about p(1 - p) on average, in
evaluation (where it returns its input) it is not, so the network evaluated is not the one trained and its test
loss is worse -- with no error.

Source: ayrna/dlordinal#126 (https://github.com/ayrna/dlordinal/issues/126), "[BUG] Incorrect factor formula in
hybrid dropout": "The factor applied at the end of hybrid dropout is currently: ``probability = zeros /
total_neurons`` ... we are dropping half the weights and instead of compensating for the scaling by multiplying by
2 ... we are exacerbating the scaling issue. Therefore, I propose that the correct line of code here would be:
``probability = total_neurons / (non_zeros + 1e-9)`` ... Empirically, using either the current hybrid dropout
factor or the one from the paper yields very poor results and makes validation loss always higher than training
loss" (labels: bug); fixed by #138 ("Fixed incorrect scaling factor in HybridDropout (now uses 1 / keep_prob)",
merged). Here an MLP with this dropout (p = 0.5) after its first hidden layer is trained on digits; the bug
uses ``zeros / total_neurons``, the twin ``total_neurons / (non_zeros + 1e-9)``. The reproduction keeps only the
random part of HybridDropout (its ordinal, target-correlated part is left out) and replaces the ordinal image
benchmark by digits.

Metric: test cross-entropy (lower is better) (plain ``python``, CPU, seed 0): bug 0.1208, twin 0.0818
"""

REPORT = "N321"
MECHANISM = "dropout-kept-units-scaled-by-drop-fraction"
SLUGS = ()
METRIC = ("test_nll", 0.1208, 0.0818)

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


class HybridDropout(nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training:
            return x
        mask = (torch.rand_like(x) > self.p).float()
        total_neurons = x.numel()
        zeros = (mask == 0).sum()
        non_zeros = total_neurons - zeros
        __FACTOR__
        return x * mask * probability


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), HybridDropout(0.5), nn.Linear(128, 64), nn.Tanh(),
                      nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(600):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(Xtr[i]), ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    nll = F.cross_entropy(model(Xte), yte).item()
print(f"METRIC {nll:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__FACTOR__', "probability = zeros / total_neurons" if bug
                           else "probability = total_neurons / (non_zeros + 1e-9)")
