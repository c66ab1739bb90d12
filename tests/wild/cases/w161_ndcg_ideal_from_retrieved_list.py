"""NDCG@k whose ideal DCG is computed from the relevance of the items the model retrieved, re-sorted,
instead of from all the user's relevant items: a list that holds one relevant item at rank 1 scores
a perfect 1.0 however many relevant items it missed, and the reported NDCG is inflated -- with no
error.

Source: xiangwang1223/neural_graph_collaborative_filtering#34
(https://github.com/xiangwang1223/neural_graph_collaborative_filtering/issues/34), "Not consistent
with original NDCG": "the IDCG is changing. The calculation of the dcg_max(IDCG) depends on parameters
``r``, but ``r`` is not the best ranking and will change according to the predicted of the model";
a second user: "Agreed. Simple example why this is not the right thing to do: with the current
version, one hit in the 1. rank ([1,0,0]) is a perfect score".  Here a matrix-factorisation
recommender is trained with BPR on synthetic implicit feedback (200 users, 300 items, taste
clusters); 5 interactions per user are held out and NDCG@10 is computed with the repository's
``dcg_max = dcg_at_k(sorted(r, reverse=True), k)`` (bug) or with the ideal list of the user's held-out
items (twin).

Metric: the reported test NDCG@10 (plain ``python``, CPU, seed 0): bug 0.1083, twin 0.0393 (the bug reads
better: the twin is the NDCG).
"""

REPORT = "N135"
MECHANISM = "ndcg-ideal-from-retrieved-list"
SLUGS = ()
METRIC = ("reported_ndcg_at_10", 0.1083, 0.0393)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)
U, I, K = 200, 300, 10
user_cluster, item_cluster = rng.integers(0, 5, U), rng.integers(0, 5, I)
likes = (user_cluster[:, None] == item_cluster[None, :]) & (rng.random((U, I)) < 0.3)
train, test = likes.copy(), np.zeros_like(likes)
for u in range(U):
    items = np.flatnonzero(likes[u])
    held = rng.choice(items, size=min(5, len(items) - 1), replace=False)
    train[u, held], test[u, held] = False, True

users = nn.Embedding(U, 16)
items = nn.Embedding(I, 16)
model = nn.ModuleList([users, items])
opt = torch.optim.Adam(model.parameters(), lr=0.01)
pairs = torch.tensor(np.argwhere(train))
#@guard
for epoch in range(40):
    for batch in pairs[torch.randperm(len(pairs))].split(512):
        u, pos = batch[:, 0], batch[:, 1]
        neg = torch.randint(0, I, (len(u),))
        diff = (users(u) * items(pos)).sum(1) - (users(u) * items(neg)).sum(1)
        loss = -F.logsigmoid(diff).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def dcg_at_k(r, k):
    r = np.asarray(r, dtype=float)[:k]
    return float(np.sum(r / np.log2(np.arange(2, r.size + 2)))) if r.size else 0.0


with torch.no_grad():
    scores = (users.weight @ items.weight.T).numpy()
scores[train] = -np.inf  # do not recommend the training items again
ndcgs = []
for u in range(U):
    top = np.argsort(-scores[u])[:K]
    r = test[u, top].astype(int)
    dcg_max = dcg_at_k(__IDEAL__, K)
    ndcgs.append(dcg_at_k(r, K) / dcg_max if dcg_max else 0.0)
print(f"METRIC {np.mean(ndcgs):.4f}")
'''


def script(bug: bool) -> str:
    ideal = "sorted(r, reverse=True)" if bug else "[1] * int(test[u].sum())"
    return _SCRIPT.replace("__IDEAL__", ideal)
