"""Link prediction whose message-passing graph still contains the held-out test edges: only the validation
edges are removed from the training graph, so every test edge is an edge the encoder aggregates over and
the test score measures memorised structure -- with no error.

Source: BUPT-GAMMA/OpenHGNN#91 (https://github.com/BUPT-GAMMA/OpenHGNN/issues/91), "Why not remove the
test_idx from the train_graph?": "It seems that only 'val_index' is removed from 'train_graph', but
'test_index' is not removed."; maintainer: "You are right. The edges of `test_idx` should be removed. We
fix the bug and thanks a lot!".  Here a two-layer GCN with a dot-product decoder is trained for link
prediction on a stochastic-block-model graph (node features: a weak community signal plus noise), the
edges split 80/10/10 into train, validation and test.  The buggy training graph removes the validation
edges only; the twin removes the validation and the test edges.

Metric: ROC AUC on the test edges against as many sampled non-edges (plain ``python``, CPU, seed 0): bug
0.8797, twin 0.5975 (the bug reads better: the twin is the held-out score)
"""

REPORT = "N180"
MECHANISM = "test-edges-left-in-message-graph"
SLUGS = ()
METRIC = ("reported_test_auc", 0.8797, 0.5975)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, COMM, F_IN = 400, 8, 16
community = torch.randint(0, COMM, (N,), generator=g)
same = community[:, None] == community[None, :]
prob = torch.where(same, torch.tensor(0.06), torch.tensor(0.006))
upper = torch.triu(torch.rand(N, N, generator=g) < prob, diagonal=1)
edges = upper.nonzero()
features = 0.5 * F.one_hot(community, COMM).float() @ torch.randn(COMM, F_IN, generator=g) \\
    + torch.randn(N, F_IN, generator=g)
perm = torch.randperm(len(edges), generator=g)
n_val = n_test = len(edges) // 10
val_edges, test_edges = edges[perm[:n_val]], edges[perm[n_val:n_val + n_test]]
train_edges = edges[perm[n_val + n_test:]]


def normalised_adjacency(edge_list):
    a = torch.zeros(N, N)
    a[edge_list[:, 0], edge_list[:, 1]] = 1
    a = a + a.T + torch.eye(N)
    d = a.sum(1).rsqrt()
    return d[:, None] * a * d[None, :]


__GRAPH__
A = normalised_adjacency(message_edges)


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(F_IN, 32), nn.Linear(32, 32)

    def forward(self, x):
        return self.l2(A @ F.relu(self.l1(A @ x)))


def pair_scores(z, pairs):
    return (z[pairs[:, 0]] * z[pairs[:, 1]]).sum(1)


model = GCN()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(150):
    z = model(features)
    neg = torch.randint(0, N, (len(train_edges), 2))
    logits = torch.cat([pair_scores(z, train_edges), pair_scores(z, neg)])
    target = torch.cat([torch.ones(len(train_edges)), torch.zeros(len(neg))])
    loss = F.binary_cross_entropy_with_logits(logits, target)
    opt.zero_grad()
    loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    z = model(features)
    neg = torch.randint(0, N, (len(test_edges), 2), generator=g)
    scores = torch.cat([pair_scores(z, test_edges), pair_scores(z, neg)])
labels = torch.cat([torch.ones(len(test_edges)), torch.zeros(len(neg))])
order = scores.argsort()
ranks = torch.empty_like(scores)
ranks[order] = torch.arange(1, len(scores) + 1).float()
n_pos, n_neg = len(test_edges), len(neg)
auc = (ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
print(f"METRIC {auc:.4f}")
'''

_BUG = "message_edges = torch.cat([train_edges, test_edges])  # everything but the validation edges"
_TWIN = "message_edges = train_edges  # everything but the validation and the test edges"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__GRAPH__", _BUG if bug else _TWIN)
