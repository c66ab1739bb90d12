"""BPR matrix factorisation whose "negative" items are drawn from all items without excluding the
user's own positives: with dense feedback a large share of the sampled negatives are items the
user liked, the model is taught to rank them below other positives, and precision@10 drops --
with no error.

Source: benfred/implicit#103 (https://github.com/benfred/implicit/pull/103), "Verify negative
sampled items in BPR" (the maintainer): "For the BPR model - we previously sampled negative items
without verifying that they were not liked by the user. While intuitively with enough items you
wouldn't think that this would significantly affect the output, it seems to have a large effect
on the p@k scores" (MovieLens 100k: P@10 0.083 without verifying, 0.164 with, 18.45% of samples
rejected).  Here 300 users and 200 items get implicit feedback from a low-rank preference model
(about a quarter of the items liked per user, some items far more popular than others); 80% of
each user's likes train a BPR model, 20% are held out.  Negatives are drawn as the report's
sampler did, as the item of a random training interaction (so popular items are drawn often:
benfred/implicit#255); the buggy sampler keeps every draw, the twin redraws any negative the user
liked in training.

Metric: precision@10 on the held-out likes (training likes excluded from the ranking; plain
``python``, CPU, seed 0): bug 0.4457, twin 0.5507.
"""

REPORT = "N115"
MECHANISM = "negatives-sampled-from-positives"
SLUGS = ()
METRIC = ("test_precision_at_10", 0.4457, 0.5507)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
U, I, D = 300, 200, 16
taste = torch.randn(U, 4, generator=g) @ torch.randn(4, I, generator=g) + 2 * torch.randn(I, generator=g)
liked = taste > taste.quantile(0.75, dim=1, keepdim=True)
held_out = liked & (torch.rand(U, I, generator=g) < 0.2)
train = liked & ~held_out
users, pos_items = train.nonzero(as_tuple=True)


def draw(n):  # as the report's sampler: the item of a random training interaction
    return pos_items[torch.randint(len(pos_items), (n,))]


def sample_negatives(u):
    j = draw(len(u))
    __VERIFY__
    return j


user_emb, item_emb = nn.Embedding(U, D), nn.Embedding(I, D)
nn.init.normal_(user_emb.weight, std=0.1)
nn.init.normal_(item_emb.weight, std=0.1)
model = nn.ModuleList([user_emb, item_emb])
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(25):
    order = torch.randperm(len(users))
    for batch in order.split(1024):
        u, i = users[batch], pos_items[batch]
        j = sample_negatives(u)
        eu = user_emb(u)
        x_uij = (eu * item_emb(i)).sum(1) - (eu * item_emb(j)).sum(1)
        opt.zero_grad()
        (-torch.nn.functional.logsigmoid(x_uij).mean() + 1e-4 * eu.pow(2).sum(1).mean()).backward()
        opt.step()

with torch.no_grad():
    scores = user_emb.weight @ item_emb.weight.T
    scores[train] = -float("inf")  # rank only items not seen in training
    top = scores.topk(10, dim=1).indices
    hits = held_out.gather(1, top).float().sum(1)
    has_test = held_out.sum(1) > 0
print(f"METRIC {(hits[has_test] / 10).mean().item():.4f}")
'''

_VERIFY = """bad = train[u, j]
    while bad.any():  # a negative the user liked: draw again
        j[bad] = draw(int(bad.sum()))
        bad = train[u, j]"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__VERIFY__", "" if bug else _VERIFY)
