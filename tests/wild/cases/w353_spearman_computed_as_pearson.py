"""A metric named ``spearmans_rho`` that computes Pearson's correlation of the raw values, with no ranking: on
skewed predictions (counts, rates from a log link) a few large values dominate the sum, and the number reported as
the rank correlation is far from it -- with no error.

Source: ayrna/skordinal#124 (https://github.com/ayrna/skordinal/pull/124), "FIX: Compute spearmans_rho with
scipy.stats.spearmanr": "The `spearmans_rho` metric computed Pearson's correlation: no ranking, no tie handling,
despite its name and docstring. It now calls `scipy.stats.spearmanr`. Previously published rho values can change.
The function's own doctest goes from `0.91654` to `0.84649`" (merged; reviewer: "seems a much better option").
Here a Poisson regression with a log link is trained on synthetic counts whose rate grows exponentially with the
features (so the counts and the predicted rates are heavily skewed), and its validation predictions are scored
with a ``spearmans_rho``; the bug returns ``np.corrcoef`` of the raw values, the twin
``scipy.stats.spearmanr``. The reproduction replaces the library's ordinal classifiers and grades by the count
model.

Metric: validation "Spearman's rho" as reported (plain ``python``, CPU, seed 0): bug 0.9998, twin 0.8355
"""

REPORT = "N327"
MECHANISM = "rank-correlation-computed-without-ranking"
SLUGS = ()
METRIC = ("val_spearman", 0.9998, 0.8355)

_SCRIPT = '''import numpy as np
import scipy.stats
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
w_true = torch.randn(6) * 0.6


def make(n):
    x = torch.randn(n, 6)
    return x, torch.poisson((x @ w_true).exp())


Xtr, ytr = make(3000)
Xva, yva = make(600)


def spearmans_rho(y_true, y_pred):
__RHO__


model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(15):
    for i in torch.randperm(len(Xtr)).split(64):
        loss = F.poisson_nll_loss(model(Xtr[i]).squeeze(1), ytr[i], log_input=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    rate = model(Xva).squeeze(1).exp()
rho = spearmans_rho(yva.numpy(), rate.numpy())
print(f"METRIC {rho:.4f}")
'''

_PEARSON = "    return float(np.corrcoef(y_true, y_pred)[0, 1])"
_SPEARMAN = "    return float(scipy.stats.spearmanr(y_true, y_pred).correlation)"


def script(bug: bool) -> str:
    return _SCRIPT.replace('__RHO__', _PEARSON if bug else _SPEARMAN)
