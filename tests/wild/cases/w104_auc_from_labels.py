"""Link prediction scored with ROC AUC computed from the thresholded predictions (0 or 1) instead of
the predicted link probabilities: the ranking the AUC measures is thrown away and the "AUC" becomes
a balanced accuracy at one threshold.

Source: pyg-team/pytorch_geometric#2248 (https://github.com/pyg-team/pytorch_geometric/pull/2248,
merged), "fix auc bug, use probabilities as input to auc instead of labels": "use positive link
probabilities as input to auc instead of predicted labels".  Here node embeddings of a synthetic
graph (five communities, links mostly inside a community) are learned from the training links with a
dot-product decoder; held-out links and as many non-links are scored.  The buggy script passes
``(prob > 0.5)`` to ``roc_auc_score``, the twin the probabilities.

Metric: validation ROC AUC (plain ``python``, CPU, seed 0): bug 0.75, twin 0.8202.
"""

REPORT = "N78"
MECHANISM = "metric-auc-from-hard-labels"
SLUGS = ()
METRIC = ("val_roc_auc", 0.75, 0.8202)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

torch.manual_seed(0)
N, C = 200, 5
community = torch.arange(N) % C
g = torch.Generator().manual_seed(1)
pairs = torch.randint(N, (20000, 2), generator=g)
same = community[pairs[:, 0]] == community[pairs[:, 1]]
keep = torch.rand(20000, generator=g) < torch.where(same, torch.tensor(0.6), torch.tensor(0.03))
edges = pairs[keep & (pairs[:, 0] != pairs[:, 1])]
perm = torch.randperm(len(edges), generator=g)
train_edges, val_edges = edges[perm[:-150]], edges[perm[-150:]]
val_neg = torch.randint(N, (150, 2), generator=g)


class LinkModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N, 16)

    def forward(self, pairs):
        return (self.emb(pairs[:, 0]) * self.emb(pairs[:, 1])).sum(1)


model = LinkModel()
opt = torch.optim.Adam(model.parameters(), lr=0.02)
#@guard
for step in range(300):
    neg = torch.randint(N, (len(train_edges), 2))
    logits = model(torch.cat([train_edges, neg]))
    target = torch.cat([torch.ones(len(train_edges)), torch.zeros(len(neg))])
    loss = F.binary_cross_entropy_with_logits(logits, target)
    opt.zero_grad()
    loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    prob = torch.sigmoid(model(torch.cat([val_edges, val_neg])))
truth = torch.cat([torch.ones(150), torch.zeros(150)])
auc = roc_auc_score(truth.numpy(), __SCORE__)
print(f"METRIC {auc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORE__", "(prob > 0.5).float().numpy()" if bug else "prob.numpy()")
