"""Top-N evaluation of a recommender that ranks the items each user already interacted with in
training: a fitted model scores those items highest, they fill the top of every list, and the
held-out items the metric looks for are pushed out of the top N.

Source: PreferredAI/cornac#483 (https://github.com/PreferredAI/cornac/issues/483), "For BiVAECF, the
interactive items in trainset are not removed during the evaluation phase": "I check the
***recommender.rank()*** and ***bivaecf.score()*** and find that the interactive items in trainset are
not removed during the evaluation phase ... there was a significant improvement for each metrics"
once they are (NDCG@50 0.2378 to 0.3392, Recall@50 0.4288 to 0.5233); maintainer: "Ideally items that
a given user has interacted with should be ignored (filtered out from the ranking list) if we wish
not recommend them."  Also finn-no/recsys_slates_dataset#15 and lyst/lightfm#349.  Here a matrix
factorisation model (BCE on observed pairs against sampled negatives) is trained on synthetic
implicit feedback (400 users, 300 items, 30 interactions per user drawn from latent tastes, 6 of them
held out per user); the twin sets the scores of each user's training items to ``-inf`` before taking
the top 10.

Metric: recall@10 on the held-out interactions (plain ``python``, CPU, seed 0): bug 0.3621, twin 0.6867.
"""

REPORT = "N71"
MECHANISM = "eval-ranks-seen-items"
SLUGS = ()
METRIC = ("test_recall_at_10", 0.3621, 0.6867)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
USERS, ITEMS, PER_USER, HELD_OUT, K = 400, 300, 30, 6, 10
g = torch.Generator().manual_seed(1)
taste = torch.randn(USERS, 4, generator=g)
style = torch.randn(ITEMS, 4, generator=g)
affinity = taste @ style.T + 0.5 * torch.randn(USERS, ITEMS, generator=g)
chosen = torch.multinomial(torch.softmax(4 * affinity, dim=1), PER_USER, generator=g)
train = torch.zeros(USERS, ITEMS, dtype=torch.bool)
test = torch.zeros(USERS, ITEMS, dtype=torch.bool)
rows = torch.arange(USERS)[:, None]
train[rows, chosen[:, HELD_OUT:]] = True
test[rows, chosen[:, :HELD_OUT]] = True


class MF(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(USERS, 16)
        self.items = nn.Embedding(ITEMS, 16)

    def forward(self, u, i):
        return (self.users(u) * self.items(i)).sum(-1)


model = MF()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
pos_u, pos_i = torch.nonzero(train, as_tuple=True)
for epoch in range(40):
    perm = torch.randperm(len(pos_u))
    for k in range(0, len(perm), 256):
        u, i = pos_u[perm[k:k + 256]], pos_i[perm[k:k + 256]]
        j = torch.randint(ITEMS, (len(u),))
        logits = torch.cat([model(u, i), model(u, j)])
        labels = torch.cat([torch.ones(len(u)), torch.zeros(len(u))])
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(logits, labels).backward()
        opt.step()

with torch.no_grad():
    scores = model.users.weight @ model.items.weight.T
__MASK__    top = scores.topk(K, dim=1).indices
    hits = test.gather(1, top).sum(1).float()
recall = (hits / HELD_OUT).mean().item()
print(f"METRIC {recall:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", "" if bug else "    scores[train] = float(\"-inf\")\n")
