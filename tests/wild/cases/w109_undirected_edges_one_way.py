"""An undirected graph given to a message-passing network with each edge listed once: message
passing follows ``edge_index`` from source to target, so every node hears only the neighbours listed
before it and half of the graph's messages are never sent.

Source: c2g-dev/city2graph#157 (https://github.com/c2g-dev/city2graph/pull/157, merged), "Fix the
treatment of undirected edges in `gdf_to_pyg` and `pyg_to_gdf`": "when an edges GeoDataFrame ...
listed each edge once, `gdf_to_pyg` passed the edges to PyTorch Geometric as directed, so message
passing only saw half of the expected edges" (and pytorch_geometric#435: "The `edge_index` needs to
contain a pair going both ways").  Here a two-layer mean-aggregation network classifies the nodes of
a synthetic graph whose own features are noisy and whose neighbours carry the class; the edge list
holds each pair once (``u < v``); the twin adds the reverse of every edge before training.

Metric: test node accuracy (plain ``python``, CPU, seed 0): bug 0.7961, twin 0.932.
"""

REPORT = "N83"
MECHANISM = "undirected-edges-one-direction"
SLUGS = ()
METRIC = ("test_node_accuracy", 0.7961, 0.932)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N, C, D = 600, 4, 16
g = torch.Generator().manual_seed(1)
label = torch.randint(C, (N,), generator=g)
centers = torch.randn(C, D, generator=g)
x = 0.6 * centers[label] + 1.6 * torch.randn(N, D, generator=g)
pairs = torch.randint(N, (6000, 2), generator=g)
same = label[pairs[:, 0]] == label[pairs[:, 1]]
pairs = pairs[same & (pairs[:, 0] < pairs[:, 1])]            # each undirected edge listed once, u < v
edge_index = pairs.t()
__EDGES__
train_mask = torch.rand(N, generator=g) < 0.5


def propagate(h, edge_index):
    src, dst = edge_index
    total = torch.zeros_like(h).index_add_(0, dst, h[src])
    count = torch.zeros(len(h)).index_add_(0, dst, torch.ones(len(src))).clamp(min=1)
    return (total + h) / (count + 1)[:, None]


class MeanGNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(D, 32)
        self.lin2 = nn.Linear(32, C)

    def forward(self, x, edge_index):
        h = F.relu(self.lin1(propagate(x, edge_index)))
        return self.lin2(propagate(h, edge_index))


model = MeanGNN()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    opt.zero_grad()
    F.cross_entropy(model(x, edge_index)[train_mask], label[train_mask]).backward()
    opt.step()

model.eval()
with torch.no_grad():
    pred = model(x, edge_index).argmax(1)
print(f"METRIC {(pred[~train_mask] == label[~train_mask]).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    edges = "# passed on as is: messages flow from u to v only" if bug else \
        "edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)   # both directions"
    return _SCRIPT.replace("__EDGES__", edges)
