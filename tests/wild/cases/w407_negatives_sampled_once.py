"""A recommender trained with negatives drawn once, when the training data are built, and reused every epoch: the
model sees the same few non-consumed items per positive for the whole run, learns to push those down, and ranks the
rest no better -- nothing fails and the training loss goes down faster.

Source: guoyang9/NCF#4 (https://github.com/guoyang9/NCF/issues/4), a PyTorch Neural Collaborative Filtering: training
negatives are sampled when the data are built and reused every epoch, where they should be redrawn each epoch,
"otherwise it will overfitting"; maintainer: "I should update the add_negative() function". Here a GMF model
(user and item embeddings, 32 dimensions) learns 150 users' implicit feedback on 200 items (each user consumed the 12
items of highest score under a hidden rank-4 preference, one of them held out), four negatives per positive; the bug
samples the negatives once before the first epoch, the twin draws them again at the start of every epoch. The
reproduction uses synthetic users and items instead of MovieLens.

Metric: hit rate at 10 of the held-out item among it and 99 non-consumed items (plain ``python``, CPU, seed 0):
bug 0.3533, twin 0.6733
"""

REPORT = "N381"
MECHANISM = "negatives-sampled-once"
SLUGS = ()
METRIC = ('test_hit_rate_at_10', 0.3533, 0.6733)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
U, I, K = 150, 200, 4
pu, qi = torch.randn(U, K), torch.randn(I, K)
scores = pu @ qi.t() + 0.5 * torch.randn(U, I)
top = scores.topk(12, dim=1).indices                 # each user consumed 12 items
test_item = top[:, 0]
train_pos = [(u, i.item()) for u in range(U) for i in top[u, 1:]]
consumed = torch.zeros(U, I, dtype=torch.bool)
consumed[torch.arange(U)[:, None], top] = True


def sample_negatives(n_neg=4):
    users, items, labels = [], [], []
    for u, i in train_pos:
        users.append(u)
        items.append(i)
        labels.append(1.0)
        cand = (~consumed[u]).nonzero().flatten()
        for j in cand[torch.randint(0, len(cand), (n_neg,))]:
            users.append(u)
            items.append(j.item())
            labels.append(0.0)
    return torch.tensor(users), torch.tensor(items), torch.tensor(labels)


class GMF(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.user, self.item = nn.Embedding(U, dim), nn.Embedding(I, dim)
        self.out = nn.Linear(dim, 1)

    def forward(self, u, i):
        return self.out(self.user(u) * self.item(i)).squeeze(-1)


model = GMF()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
data = sample_negatives()
#@guard
for epoch in range(25):
__RESAMPLE__    users, items, labels = data
    perm = torch.randperm(len(users))
    for k in range(0, len(perm), 256):
        b = perm[k:k + 256]
        loss = F.binary_cross_entropy_with_logits(model(users[b], items[b]), labels[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
torch.manual_seed(1)
hits = 0
with torch.no_grad():
    for u in range(U):
        cand = (~consumed[u]).nonzero().flatten()
        items = torch.cat([test_item[u:u + 1], cand[torch.randperm(len(cand))[:99]]])
        s = model(torch.full((100,), u), items)
        hits += int((s > s[0]).sum().item() < 10)
print(f"METRIC {hits / U:.4f}")
'''


def script(bug: bool) -> str:
    resample = '' if bug else '    data = sample_negatives()\n'
    return _SCRIPT.replace('__RESAMPLE__', resample)
