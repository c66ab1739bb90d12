"""A link-prediction split drawn over an edge list that stores every undirected edge twice, as
``(u, v)`` and ``(v, u)``: most test edges keep their reverse in the training set, a node-embedding
model has already fitted them, and the reported test ROC-AUC is inflated -- with no error.

Source: THUDM/CogDL#18 (https://github.com/THUDM/CogDL/issues/18), "Possible label leakage problem
with the link prediction task": "reads the adjacency matrix directly without removing duplicates,
this means the the edge list would have (x, y) and (y, x) at the same time for every edge ... As a
result, a great portion of the generated test edges are also in the training set, just with a
reversed order of two ends ... I can only get about 0.8 ROC-AUC on PPI instead of over 0.9";
maintainer: "We will fix this issue as soon as possible".  Here node embeddings (a dot-product
decoder) are trained on a 300-node graph with four communities; 20% of the edges are held out.  The
buggy split shuffles the directed list, the twin splits the undirected edges and adds both
directions of the training ones.

Metric: the reported test ROC-AUC against as many random non-edges (plain ``python``, CPU, seed 0):
bug 0.8656, twin 0.526 (the bug reads better: the twin is the AUC on unseen edges).
"""

REPORT = "N127"
MECHANISM = "undirected-edges-split-as-directed"
SLUGS = ()
METRIC = ("reported_test_roc_auc", 0.8656, 0.526)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N = 300
block = torch.arange(N) % 4
prob = torch.where(block[:, None] == block[None, :], 0.06, 0.004)
upper = torch.triu(torch.rand(N, N, generator=g) < prob, diagonal=1)
undirected = upper.nonzero()  # each edge once, u < v
edges = torch.cat([undirected, undirected.flip(1)])  # the edge list as read from the adjacency matrix

__SPLIT__

emb = nn.Embedding(N, 16)
model = emb
opt = torch.optim.Adam(emb.parameters(), lr=0.01)
#@guard
for epoch in range(300):
    neg = torch.randint(0, N, train_edges.shape)
    pos_score = (emb(train_edges[:, 0]) * emb(train_edges[:, 1])).sum(1)
    neg_score = (emb(neg[:, 0]) * emb(neg[:, 1])).sum(1)
    loss = F.binary_cross_entropy_with_logits(torch.cat([pos_score, neg_score]),
                                              torch.cat([torch.ones_like(pos_score), torch.zeros_like(neg_score)]))
    opt.zero_grad()
    loss.backward()
    opt.step()

adjacency = torch.zeros(N, N, dtype=torch.bool)
adjacency[edges[:, 0], edges[:, 1]] = True
neg = torch.randint(0, N, (4 * len(test_edges), 2), generator=g)
neg = neg[~adjacency[neg[:, 0], neg[:, 1]] & (neg[:, 0] != neg[:, 1])][:len(test_edges)]
with torch.no_grad():
    scores = torch.cat([(emb(test_edges[:, 0]) * emb(test_edges[:, 1])).sum(1),
                        (emb(neg[:, 0]) * emb(neg[:, 1])).sum(1)])
labels = torch.cat([torch.ones(len(test_edges)), torch.zeros(len(neg))])
print(f"METRIC {roc_auc_score(labels.numpy(), scores.numpy()):.4f}")
'''

_DIRECTED = """order = torch.randperm(len(edges), generator=g)
cut = int(0.8 * len(edges))
train_edges, test_edges = edges[order[:cut]], edges[order[cut:]]"""

_UNDIRECTED = """order = torch.randperm(len(undirected), generator=g)
cut = int(0.8 * len(undirected))
train_und, test_edges = undirected[order[:cut]], undirected[order[cut:]]
train_edges = torch.cat([train_und, train_und.flip(1)])"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SPLIT__", _DIRECTED if bug else _UNDIRECTED)
