"""Hard negative pairs mined as the farthest pairs of the batch instead of the closest: the contrastive loss
only ever sees negatives already beyond its margin, whose loss term is zero, so training reduces to pulling
positive pairs together and the embedding collapses -- with no error.

Source: adambielski/siamese-triplet#3 (https://github.com/adambielski/siamese-triplet/issues/3), "About choosing
hard negative pairs": "Maybe in class `HardNegativePairSelector`, the hard negative pairs should be the pairs
with closest distances, since the objective is to separate the embeddings in a negative pair"; maintainer:
"Thanks for spotting this - you're absolutely right, that's a stupid bug. Will fix it now" (fixed in #4,
merged).  Here an MLP embeds scikit-learn's digits in 8 dimensions and is trained with the repository's
online pair loss (all positive pairs of a batch, as many hard negative pairs, contrastive loss with margin
1).  The buggy selector keeps the negative pairs with the largest distances, the twin the smallest.

Metric: 1-nearest-neighbour test accuracy of the embedding (plain ``python``, CPU, seed 0): bug 0.6650, twin 0.9363
"""

REPORT = "N209"
MECHANISM = "hard-negative-pairs-chosen-farthest"
SLUGS = ()
METRIC = ("knn_test_accuracy", 0.6650, 0.9363)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
MARGIN = 1.0


def hard_negative_pairs(emb, labels):
    dist = torch.cdist(emb, emb).pow(2)
    i, j = torch.triu_indices(len(labels), len(labels), 1)
    same = labels[i] == labels[j]
    pos = torch.stack([i[same], j[same]], 1)
    neg = torch.stack([i[~same], j[~same]], 1)
    neg_dist = dist[neg[:, 0], neg[:, 1]].detach()
    top = neg_dist.argsort(descending=__DESC__)[:len(pos)]
    return pos, neg[top]


#@guard
for epoch in range(15):
    perm = torch.randperm(len(Xtr))
    for s in range(0, len(Xtr), 100):
        b = perm[s:s + 100]
        emb = model(Xtr[b])
        pos, neg = hard_negative_pairs(emb, Ytr[b])
        pos_loss = (emb[pos[:, 0]] - emb[pos[:, 1]]).pow(2).sum(1)
        neg_loss = F.relu(MARGIN - (emb[neg[:, 0]] - emb[neg[:, 1]]).pow(2).sum(1).sqrt()).pow(2)
        loss = torch.cat([pos_loss, neg_loss]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    nearest = torch.cdist(model(Xte), model(Xtr)).argmin(1)
    acc = (Ytr[nearest] == Yte).float().mean()
print(f"METRIC {acc.item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DESC__", "True" if bug else "False")
