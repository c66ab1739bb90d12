"""A pairwise ranking hinge loss that averages the negatives' scores before the margin: one hinge term ``max(0,
margin - s_pos + mean(s_neg))`` per query instead of one per negative, so a hard negative scored above the
positive costs nothing once the easy negatives pull the mean down -- with no error.

Source: NTMC-Community/MatchZoo-py#159 (https://github.com/NTMC-Community/MatchZoo-py/issues/159),
``RankHingeLoss`` concatenates the ``num_neg`` negatives' scores, takes ``torch.mean`` over them and passes the
mean to ``F.margin_ranking_loss`` with the positive; the reporter proposed a hinge per negative and reported a
large gain, and the issue was labelled a bug (a collaborator asked for the pull request). Here a two-tower scorer
ranks 20 candidate items for each user of a synthetic recommender (a user prefers items close to a hidden taste
vector; a few "hard" candidates share the positive's cluster), trained with one positive and 8 negatives per query
of which 2 are hard; the buggy loss takes the mean of the negatives before the hinge, the twin the mean of the
hinges. MatchZoo ranks text pairs; here the towers embed vectors.

Metric: test hits@1 among 20 candidates (plain ``python``, CPU, seed 0): bug 0.4550, twin 0.9210
"""

REPORT = "N253"
MECHANISM = "hinge-margin-on-mean-negative-score"
SLUGS = ()
METRIC = ("test_hits_at_1", 0.4550, 0.9210)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
D, C, I = 16, 12, 600
centres = torch.randn(C, D)
item_cluster = torch.randint(0, C, (I,))
items = centres[item_cluster] + 0.6 * torch.randn(I, D)


def queries(n, n_easy, n_hard):
    taste = items[torch.randint(0, I, (n,))] + 0.3 * torch.randn(n, D)
    user = taste + 0.5 * torch.randn(n, D)
    pos = torch.cdist(taste, items).argmin(1)
    same = item_cluster[None, :] == item_cluster[pos][:, None]
    same[torch.arange(n), pos] = False
    hard = torch.multinomial(same.float() + 1e-6, n_hard)
    easy = torch.randint(0, I, (n, n_easy))
    return user, pos, torch.cat([hard, easy], 1)


class Towers(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 32))
        self.item = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, user, item_ids):
        return (self.user(user)[:, None, :] * self.item(items[item_ids])).sum(-1)


def rank_hinge_loss(s_pos, s_neg, margin=1.0):
    __LOSS__


model = Towers()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    user, pos, neg = queries(128, 6, 2)
    s = model(user, torch.cat([pos[:, None], neg], 1))
    loss = rank_hinge_loss(s[:, 0], s[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.manual_seed(1234)
user, pos, neg = queries(1000, 15, 4)
with torch.no_grad():
    s = model(user, torch.cat([pos[:, None], neg], 1))
print(f"METRIC {(s.argmax(1) == 0).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        loss = "return F.margin_ranking_loss(s_pos, s_neg.mean(1), torch.ones_like(s_pos), margin=margin)"
    else:
        loss = ("return F.margin_ranking_loss(s_pos[:, None].expand_as(s_neg), s_neg, torch.ones_like(s_neg), "
                "margin=margin)")
    return _SCRIPT.replace('__LOSS__', loss)
