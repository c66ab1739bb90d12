"""A ranking metric whose top-k buffer starts as zeros: when a user has fewer than k candidate items left
after the already-liked ones are filtered out, the unfilled slots keep the value 0 and are scored as
recommendations of item 0 -- the most popular item, often in the user's held-out likes -- so precision@k is
inflated, with no error.

Source: benfred/implicit#330 (https://github.com/benfred/implicit/issues/330), "ranking_metrics_at_k bug": "`ids`
array is first initialized to zeros and then the recommendations are filled in. If there is < K
recommendations, the remaining values are kept at zero ... The recommended `ids` array is later iterated over
and its checked whether the IDs are in the `likes` set. If they are the prediction is recognized as successful.
The problem here is that `ids` array contains the zeros from initialization and therefore can make the model
score points for items which the model has never predicted (items with id 0). Possible fix could be to
initialize the `ids` array to -1 instead?"; fixed by a pull request ("Done").  Here a matrix factorisation is
trained with BPR on synthetic implicit feedback (15 items numbered by popularity, so item 0 is the most liked;
heavy users like most of the catalogue), 30% of each user's likes are held out, and precision@10 is computed
over the items each user has not liked in training.  The buggy buffer is ``torch.zeros(k, dtype=torch.long)``,
the twin's ``torch.full((k,), -1)``.

Metric: precision@10 on the held-out likes (plain ``python``, CPU, seed 0): bug 0.4131, twin 0.3445 (the bug reads
better)
"""

REPORT = "N197"
MECHANISM = "topk-buffer-zeros-scored-as-item"
SLUGS = ()
METRIC = ("reported_precision_at_10", 0.4131, 0.3445)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
U, I, D, k = 300, 15, 8, 10
u_f, i_f = torch.randn(U, D, generator=g), torch.randn(I, D, generator=g)
pop = torch.linspace(4.0, 0.0, I)  # item 0 the most popular
logits = u_f @ i_f.T / 2 + pop + torch.randn(U, 1, generator=g) * 2.0  # some users like most items
likes = torch.rand(U, I, generator=g) < torch.sigmoid(logits)
test = likes & (torch.rand(U, I, generator=g) < 0.3)
train = likes & ~test

users, items = train.nonzero(as_tuple=True)
P, Q = nn.Embedding(U, D), nn.Embedding(I, D)
bias = nn.Embedding(I, 1)
model = nn.ModuleList([P, Q, bias])
opt = torch.optim.Adam(model.parameters(), lr=0.05)


def score(u, i):
    return (P(u) * Q(i)).sum(-1) + bias(i).squeeze(-1)


#@guard
for epoch in range(30):
    perm = torch.randperm(len(users))
    for s in range(0, len(perm), 512):
        b = perm[s:s + 512]
        u, i = users[b], items[b]
        j = torch.randint(0, I, (len(b),))
        loss = -F.logsigmoid(score(u, i) - score(u, j)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    scores = (P.weight @ Q.weight.T + bias.weight.T)
precisions = []
for u in range(U):
    if test[u].sum() == 0:
        continue
    candidates = (~train[u]).nonzero(as_tuple=True)[0]
    top = candidates[scores[u, candidates].argsort(descending=True)[:k]]
    ids = __BUFFER__
    ids[:len(top)] = top
    liked = set(test[u].nonzero(as_tuple=True)[0].tolist())
    precisions.append(sum(int(i) in liked for i in ids.tolist()) / k)
print(f"METRIC {sum(precisions) / len(precisions):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__BUFFER__", "torch.zeros(k, dtype=torch.long)" if bug else "torch.full((k,), -1)")
