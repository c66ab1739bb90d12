"""Graphs batched into one disconnected graph with per-graph instead of cumulative node offsets: from
the third graph on, each graph's bonds are shifted by the previous graph's size only, so they join
nodes of other graphs, message passing mixes the molecules of a batch, and the classifier learns
little -- with no error (every index stays in range).

Source: deepchem/deepchem#3291 (https://github.com/deepchem/deepchem/pull/3291), "Batchgraph edge_index
bug fix": "There is currently a bug in which the edge_index is incorrectly calculated, leading to
missing indices (wrong node values). ``num_nodes_list`` is used to add the number of nodes to each
subsequent edge_index value, however, it does not use a cumulative sum. For example, if the number of
nodes in the graph list is [4, 3, 5, 6], the cumulative sum which should be added to each index is
[4,7,12,18]" (merged).  Here a two-layer message-passing network classifies random molecule-like graphs
(6-14 nodes) as sparsely or densely bonded, batching 32 graphs at a time for training and evaluation.
The buggy ``batch_graphs`` shifts graph ``k`` by ``sizes[k - 1]``, the twin by the cumulative size of
the graphs before it.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.46, twin 0.7933
"""

REPORT = "N164"
MECHANISM = "graph-batch-offsets-not-cumulative"
SLUGS = ()
METRIC = ("val_accuracy", 0.46, 0.7933)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)


def random_graph():
    """A molecule-like graph: 6-14 nodes, sparse (class 0) or dense (class 1) bonds."""
    n = int(torch.randint(6, 15, (1,), generator=g))
    label = int(torch.randint(0, 2, (1,), generator=g))
    p = 0.5 if label else 0.25
    upper = torch.triu(torch.rand(n, n, generator=g) < p, diagonal=1)
    src, dst = upper.nonzero(as_tuple=True)
    edges = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1)
    return torch.randn(n, 4, generator=g), edges, label


def batch_graphs(graphs):
    """Concatenate graphs into one disconnected graph, shifting each graph's node ids."""
    sizes = [x.shape[0] for x, _, _ in graphs]
    offsets = __OFFSETS__
    x = torch.cat([x for x, _, _ in graphs])
    edge_index = torch.cat([e + off for (_, e, _), off in zip(graphs, offsets)], 1)
    batch = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
    return x, edge_index, batch, torch.tensor([y for _, _, y in graphs])


class GNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.self1, self.nbr1 = nn.Linear(4, 32), nn.Linear(4, 32)
        self.self2, self.nbr2 = nn.Linear(32, 32), nn.Linear(32, 32)
        self.out = nn.Linear(32, 2)

    def forward(self, x, edge_index, batch, n_graphs):
        for lin_self, lin_nbr in ((self.self1, self.nbr1), (self.self2, self.nbr2)):
            msg = torch.zeros(x.shape[0], lin_nbr.in_features).index_add_(0, edge_index[1], x[edge_index[0]])
            x = F.relu(lin_self(x) + lin_nbr(msg))
        pooled = torch.zeros(n_graphs, 32).index_add_(0, batch, x)
        return self.out(pooled / torch.bincount(batch, minlength=n_graphs)[:, None])


train = [random_graph() for _ in range(800)]
val = [random_graph() for _ in range(300)]
model = GNN()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(8):
    for i in range(0, 800, 32):
        x, ei, b, y = batch_graphs(train[i:i + 32])
        loss = F.cross_entropy(model(x, ei, b, len(y)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

correct = 0
with torch.no_grad():
    for i in range(0, 300, 32):
        x, ei, b, y = batch_graphs(val[i:i + 32])
        correct += (model(x, ei, b, len(y)).argmax(1) == y).sum().item()
print(f"METRIC {correct / 300:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__OFFSETS__", "[0] + sizes[:-1]" if bug
                           else "[0] + torch.tensor(sizes).cumsum(0)[:-1].tolist()")
