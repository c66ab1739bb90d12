"""Evaluation of a neighbour-sampled mini-batch scored on every node of the sampled subgraph: a
``NeighborLoader``-style batch holds its seed nodes first and then the neighbours sampled for them, and the
model predicts for all of them, but only the first ``batch_size`` are the nodes being evaluated -- scoring all
of them counts sampled neighbours, many of them training nodes, in the test accuracy, with no error.

Source: pyg-team/pytorch_geometric#7372 (https://github.com/pyg-team/pytorch_geometric/issues/7372),
"NeighborLoader not oblious behaviour" (labels: documentation): "NeighborLoader returns *all* sampled neighbors
and after forwarding the model one ends up with more data than initial batch_size. Code examples quietly return
the first "batch_size" points, i.e.: `result = model(batch)[:batch.batch_size]` ... This is not obvious and,
as far as I can see, not documented"; maintainer: "This is actually mentioned ... the first batch_size nodes
represent the set of original mini-batch nodes. I agree that we can probably make this more visible since this
is crucial for the usage of `NeighborLoader`".  Here a one-layer mean-aggregation network (GraphSAGE-like) is
trained on a stochastic block model with noisy node features, and the test nodes are evaluated in batches of
32 seeds with up to 8 sampled neighbours each, as ``NeighborLoader`` builds them (seeds first).  The buggy
evaluation scores ``out`` and ``batch_y`` whole, the twin ``out[:batch_size]`` and ``batch_y[:batch_size]``.

Metric: reported test accuracy (plain ``python``, CPU, seed 0): bug 0.7336, twin 0.6125 (the bug reads better)
"""

REPORT = "N199"
MECHANISM = "sampled-neighbours-scored-with-seed-nodes"
SLUGS = ()
METRIC = ("reported_test_accuracy", 0.7336, 0.6125)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, C, F_IN = 800, 4, 32
y = torch.randint(0, C, (N,), generator=g)
p = torch.where(y[:, None] == y[None, :], 0.012, 0.008)
adj = torch.rand(N, N, generator=g) < p
adj = (adj | adj.T).fill_diagonal_(False)
centers = torch.randn(C, F_IN, generator=g) * 0.25
x = centers[y] + torch.randn(N, F_IN, generator=g)
perm = torch.randperm(N, generator=g)
train_idx, test_idx = perm[:400], perm[400:]


class SAGE(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * F_IN, 128)
        self.out = nn.Linear(128, C)

    def forward(self, x, adj):
        deg = adj.sum(1, keepdim=True).clamp(min=1)
        neigh = (adj.float() @ x) / deg
        return self.out(F.relu(self.lin(torch.cat([x, neigh], 1))))


def sample_batch(seeds, fanout=8):
    """Seeds first, then up to ``fanout`` sampled neighbours of each (NeighborLoader's node order)."""
    extra = []
    for s in seeds.tolist():
        nb = adj[s].nonzero(as_tuple=True)[0]
        extra.append(nb[torch.randperm(len(nb), generator=g)[:fanout]])
    rest = torch.cat(extra)
    rest = rest[~torch.isin(rest, seeds)].unique()
    nodes = torch.cat([seeds, rest])
    return nodes, adj[nodes][:, nodes]


model = SAGE()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(300):
    out = model(x, adj)
    loss = F.cross_entropy(out[train_idx], y[train_idx])
    opt.zero_grad()
    loss.backward()
    opt.step()

correct = total = 0
with torch.no_grad():
    for i in range(0, len(test_idx), 32):
        seeds = test_idx[i:i + 32]
        batch_size = len(seeds)
        nodes, sub = sample_batch(seeds)
        out, batch_y = model(x[nodes], sub), y[nodes]
        __SLICE__
        correct += (out.argmax(1) == batch_y).sum().item()
        total += len(batch_y)
print(f"METRIC {correct / total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SLICE__", "pass" if bug else "out, batch_y = out[:batch_size], batch_y[:batch_size]")
