"""A Spearman correlation whose ranking gives tied values consecutive ranks in the order they come, where Spearman's
rho gives every member of a tie their average rank: on targets with many ties (ratings, ordinal grades) the tied
targets are ranked at random against each other and the reported correlation falls well below the true one --
with no error.

Source: Lightning-AI/torchmetrics#444 (https://github.com/Lightning-AI/torchmetrics/issues/444), "`SpearmanCorrcoef`
bug due to incorrect ranking": "There is a bug in the `_rank_data` function ... ``scipy.stats.spearman =
0.3529411764705882`` ... ``torchmetrics.SpearmanCorrcoef = 0.10714283035714954`` ... ``spearman._rank_data(a_t)``
gives ``tensor([4., 1., 7., 5., 2., 6., 3.])`` [where] ``stats.rankdata(a)`` [gives] ``array([4.5, 2. , 7. , 4.5, 2. ,
6. , 2. ])``" (labels: bug; fixed by #448). Here a regressor is trained on synthetic items graded 1 to 3 (a
rounded noisy function of eight features), and the validation Spearman correlation between its predictions and
the ratings is computed with a ``_rank_data`` written like the reported one; the bug leaves ties with their
consecutive ranks, the twin replaces each tie's ranks by their mean (as SciPy's ``rankdata``). The reproduction
replaces the reporter's arrays by a trained model's validation predictions.

Metric: validation Spearman correlation as reported (plain ``python``, CPU, seed 0): bug 0.8160, twin 0.8756
"""

REPORT = "N318"
MECHANISM = "rank-correlation-ties-ranked-ordinally"
SLUGS = ()
METRIC = ("val_spearman", 0.8160, 0.8756)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
w_true = torch.randn(8)


def make(n):
    x = torch.randn(n, 8)
    score = torch.tanh(x @ w_true / 3)
    rating = (2 + 1.4 * score + 0.4 * torch.randn(n)).round().clamp(1, 3)
    return x, rating


Xtr, ytr = make(2000)
Xva, yva = make(500)


def _rank_data(data):
    n = data.numel()
    rank = torch.empty_like(data)
    idx = data.argsort()
    rank[idx] = torch.arange(1, n + 1, dtype=data.dtype)
__TIES__
    return rank


def spearman(preds, target):
    rp, rt = _rank_data(preds), _rank_data(target)
    rp, rt = rp - rp.mean(), rt - rt.mean()
    return (rp * rt).sum() / (rp.norm() * rt.norm())


model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(10):
    for i in torch.randperm(len(Xtr)).split(64):
        loss = F.mse_loss(model(Xtr[i]).squeeze(1), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    rho = spearman(model(Xva).squeeze(1), yva).item()
print(f"METRIC {rho:.4f}")
'''

_TIES = '''    for value in data.unique():
        tied = data == value
        rank[tied] = rank[tied].mean()'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__TIES__\n', "" if bug else _TIES + "\n")
