"""Ranking evaluation that builds each user's set of relevant items from every evaluation row, the negative
(label 0) rows included: items the user was shown and rejected count as hits, so precision@k is inflated and a
model is credited for recommending what users turned down -- with no error.

Source: massquantity/LibRecommender#364 (https://github.com/massquantity/LibRecommender/issues/364): the evaluation's
``user_consumed`` was built from all evaluation interactions, negatives included; maintainer: "this is indeed a
bug" (fixed by #366). Here users and items have hidden 4-dimensional tastes, each user is shown 30 items and clicks
some of them, a matrix-factorisation model is trained with binary cross-entropy on 70% of the impressions, and
precision@5 is computed on the other 30% over the items the user was not shown in training; the bug's relevant set
is every evaluation row of the user, the twin's only the clicked ones. LibRecommender's models and evaluation
pipeline are replaced by the factorisation and a loop over users.

Metric: the reported test precision@5 (plain ``python``, CPU, seed 0): bug 0.0952, twin 0.0683 (the twin's is
the true precision)
"""

REPORT = "N296"
MECHANISM = "relevant-set-includes-negative-rows"
SLUGS = ()
METRIC = ("test_precision_at_5", 0.0952, 0.0683)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
USERS, ITEMS, SHOWN = 300, 120, 30
taste_u, taste_i = torch.randn(USERS, 4), torch.randn(ITEMS, 4)
rows = []
for u in range(USERS):
    shown = torch.randperm(ITEMS)[:SHOWN]
    p = torch.sigmoid(3 * taste_u[u] @ taste_i[shown].T - 1.5)
    clicked = torch.bernoulli(p)
    for i, c in zip(shown.tolist(), clicked.tolist()):
        rows.append((u, i, c))
rows = torch.tensor(rows)
rows = rows[torch.randperm(len(rows))]
cut = int(0.7 * len(rows))
train, test = rows[:cut], rows[cut:]


class MF(nn.Module):
    def __init__(self):
        super().__init__()
        self.u = nn.Embedding(USERS, 8)
        self.i = nn.Embedding(ITEMS, 8)
        self.bias = nn.Embedding(ITEMS, 1)

    def forward(self, u, i):
        return (self.u(u) * self.i(i)).sum(-1) + self.bias(i).squeeze(-1)


model = MF()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
u, i, y = train[:, 0].long(), train[:, 1].long(), train[:, 2]
#@guard
for step in range(300):
    loss = F.binary_cross_entropy_with_logits(model(u, i), y) + 1e-3 * (model.u.weight ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

precisions = []
with torch.no_grad():
    for user in range(USERS):
        mine = test[test[:, 0] == user]
        if not (mine[:, 2] == 1).any():
            continue
        consumed = set(__CONSUMED__)
        seen = set(train[train[:, 0] == user][:, 1].long().tolist())
        scores = model(torch.full((ITEMS,), user), torch.arange(ITEMS))
        scores[list(seen)] = -float("inf")
        top = scores.topk(5).indices.tolist()
        precisions.append(sum(t in consumed for t in top) / 5)
print(f"METRIC {sum(precisions) / len(precisions):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CONSUMED__', 'mine[:, 1].long().tolist()' if bug
                           else 'mine[mine[:, 2] == 1][:, 1].long().tolist()')
