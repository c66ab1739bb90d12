"""Mean reciprocal rank computed as the reciprocal of the mean rank: ``1 / mean(rank)`` is not
``mean(1 / rank)`` -- one badly ranked test triple drags the whole score down -- so the reported MRR is far
below the model's true MRR -- with no error.

Source: Sujit-O/pykg2vec#96 (https://github.com/Sujit-O/pykg2vec/issues/96), "fix the definition of MRR"
(labels: bug): "It is the mean of reciprocal rank instead of reciprocal of mean rank. This should be fixed";
"fixed".  Here a DistMult model is trained on a synthetic knowledge graph (60 entities in 6 clusters, 3
relations that map each cluster to another, 1500 triples) with negative sampling, and test triples are ranked
against every tail entity (raw ranks).  The buggy evaluation reports ``1 / ranks.mean()``, the twin
``(1 / ranks).mean()``.

Metric: reported test MRR (plain ``python``, CPU, seed 0): bug 0.0930, twin 0.2163
"""

REPORT = "N216"
MECHANISM = "mrr-as-reciprocal-of-mean-rank"
SLUGS = ()
METRIC = ("reported_test_mrr", 0.0930, 0.2163)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
E, R, C = 60, 3, 6
cluster = torch.arange(E) % C
target = torch.stack([torch.randperm(C) for _ in range(R)])
h = torch.randint(0, E, (1800,))
r = torch.randint(0, R, (1800,))
members = [torch.nonzero(cluster == c).squeeze(1) for c in range(C)]
t = torch.stack([members[int(target[r[i], cluster[h[i]]])][torch.randint(0, E // C, ())] for i in range(1800)])
train, test = slice(0, 1500), slice(1500, 1800)


class DistMult(nn.Module):
    def __init__(self):
        super().__init__()
        self.ent = nn.Embedding(E, 16)
        self.rel = nn.Embedding(R, 16)

    def forward(self, h, r):
        return (self.ent(h) * self.rel(r)) @ self.ent.weight.T


model = DistMult()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    b = torch.randint(0, 1500, (128,))
    loss = F.cross_entropy(model(h[train][b], r[train][b]), t[train][b])
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    scores = model(h[test], r[test])
    true = scores.gather(1, t[test].unsqueeze(1))
    ranks = (scores > true).sum(1).float() + 1
mrr = __MRR__
print(f"METRIC {mrr.item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MRR__", "1.0 / ranks.mean()" if bug else "(1.0 / ranks).mean()")
