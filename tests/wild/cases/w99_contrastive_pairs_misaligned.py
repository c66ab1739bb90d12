"""Contrastive pretraining whose anchor tensor is laid out differently from its pair tensor: the
pairs are ``cat([positives of a0..aN, negatives of a0..aN])`` but the anchors are
``repeat_interleave(k * 2)``, so most rows compare an anchor with another anchor's neighbours, under
the wrong +1/-1 label.  The loss trains, on scrambled targets.

Source: OpenTabular/DeepTab#414 (https://github.com/OpenTabular/DeepTab/issues/414, labelled bug,
closed), "Contrastive pretraining pairs anchors with the wrong positives/negatives": "The pair tensor
is built as `torch.cat(pairs, dim=0)` = `[positives of a0..aN | negatives of a0..aN]`, but the anchor
tensor is built with `embeddings.repeat_interleave(k_neighbors * len(pairs), dim=0)` ... for N=4
anchors, k=2 neighbors, **12 of 16 (anchor, pair, label) triples reference the wrong anchor** ... The
contrastive pretraining objective is effectively scrambled noise ... The correct construction is
`embeddings.repeat_interleave(k_neighbors, dim=0).repeat(len(pairs), 1)`."  Here a tabular encoder
(the 13 standardised columns of scikit-learn's wine data, 120 training rows) is pretrained with
``CosineEmbeddingLoss`` on k = 4 positives (rows of the same class) and 4 negatives per anchor, and
judged by a logistic-regression probe on its 2-dimensional embeddings of the 58 held-out rows; the
twin builds the anchors as the fix does.

Metric: probe accuracy on the held-out rows (plain ``python``, CPU, seed 0): bug 0.569, twin 0.9483.
"""

REPORT = "N73"
MECHANISM = "contrastive-pairs-misaligned"
SLUGS = ()
METRIC = ("probe_val_accuracy", 0.569, 0.9483)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression

torch.manual_seed(0)
wine = load_wine()
perm = torch.randperm(len(wine.target), generator=torch.Generator().manual_seed(1))
X = torch.tensor(wine.data, dtype=torch.float32)[perm]
Y = torch.tensor(wine.target)[perm]
X = (X - X[:120].mean(0)) / X[:120].std(0)
K = 4

encoder = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(encoder.parameters(), lr=1e-2)
model = encoder
#@guard
loss_fn = nn.CosineEmbeddingLoss(margin=0.0)
g = torch.Generator().manual_seed(2)


def draw(rows):
    """K random rows (with replacement) among the training rows where ``rows`` is true."""
    candidates = torch.nonzero(rows).flatten()
    return candidates[torch.randint(len(candidates), (K,), generator=g)]


for step in range(300):
    idx = torch.randint(120, (16,), generator=g)
    pos = torch.stack([draw(Y[:120] == Y[i]) for i in idx])
    neg = torch.stack([draw(Y[:120] != Y[i]) for i in idx])
    embeddings = encoder(X[idx])
    pairs = [encoder(X[pos.flatten()]), encoder(X[neg.flatten()])]      # [positives of a0..aN], [negatives ...]
    pair_emb = torch.cat(pairs, dim=0)
    labels = torch.cat([torch.ones(len(idx) * K), -torch.ones(len(idx) * K)])
    anchors = __ANCHORS__
    loss = loss_fn(anchors, pair_emb, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    z = encoder(X).numpy()
probe = LogisticRegression(max_iter=1000).fit(z[:120], Y[:120].numpy())
print(f"METRIC {probe.score(z[120:], Y[120:].numpy()):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ANCHORS__", "embeddings.repeat_interleave(K * len(pairs), dim=0)" if bug
                           else "embeddings.repeat_interleave(K, dim=0).repeat(len(pairs), 1)")
