"""A graph network's node model that gathers each edge's message from its target node and averages the messages at
the source node (``scatter_mean(out, row)`` with ``x[col]``), where a directed edge carries information from its
source to its target: every node hears its out-neighbours instead of its in-neighbours, so a node property that
depends on what flows into it cannot be learnt -- with no error.

Source: pyg-team/pytorch_geometric#670 (https://github.com/pyg-team/pytorch_geometric/issues/670), "Sample code for
using torch_geometric.nn.MetaLayer": "in the implementation of forward in NodeModel, scatter_mean incorrectly
aggregates around the source nodes of directed edges rather than the destination nodes ... ``row, col =
edge_index; out = torch.cat([x[col], edge_attr], dim=1); out = self.node_mlp_1(out); out = scatter_mean(out, row,
dim=0, dim_size=x.size(0))``"; maintainer: "Thanks for noticing. You are indeed right. I fixed it in master"
(the fixed example gathers ``x[row]`` and scatters at ``col``). Here a random directed graph of 3000 nodes (each
node has three in-neighbours; out-degrees vary) has four random features per node and a random edge feature,
and a node's class is the largest of the mean features of its in-neighbours; a ``NodeModel`` written like the
documentation's (with ``scatter_mean`` done by ``index_reduce``) is trained on 2000 nodes; the bug gathers at
``col`` and scatters at ``row``, the twin the reverse. The reproduction replaces the paper's tasks by this graph.

Metric: held-out node accuracy (plain ``python``, CPU, seed 0): bug 0.2430, twin 0.9570
"""

REPORT = "N312"
MECHANISM = "messages-aggregated-at-source-nodes"
SLUGS = ()
METRIC = ("test_node_accuracy", 0.2430, 0.9570)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N, K, FX, FE, FU = 3000, 3, 4, 2, 2
x = torch.randn(N, FX)
target = torch.arange(N).repeat_interleave(K)
source = torch.randint(0, N, (N * K,))
edge_index = torch.stack([source, target])
edge_attr = torch.randn(N * K, FE)
u = torch.zeros(1, FU)
batch = torch.zeros(N, dtype=torch.long)
labels = x[source].view(N, K, FX).mean(1).argmax(1)
train, test = torch.arange(2000), torch.arange(2000, N)


def scatter_mean(src, index, dim_size):
    out = torch.zeros(dim_size, src.size(1))
    return out.index_reduce(0, index, src, "mean", include_self=False)


class NodeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.node_mlp_1 = nn.Sequential(nn.Linear(FX + FE, 32), nn.ReLU(), nn.Linear(32, 32))
        self.node_mlp_2 = nn.Sequential(nn.Linear(FX + 32 + FU, 32), nn.ReLU(), nn.Linear(32, FX))

    def forward(self, x, edge_index, edge_attr, u, batch):
        row, col = edge_index
        out = torch.cat([__GATHER__, edge_attr], dim=1)
        out = self.node_mlp_1(out)
        out = scatter_mean(out, __SCATTER__, dim_size=x.size(0))
        out = torch.cat([x, out, u[batch]], dim=1)
        return self.node_mlp_2(out)


model = NodeModel()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    logits = model(x, edge_index, edge_attr, u, batch)
    loss = F.cross_entropy(logits[train], labels[train])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(x, edge_index, edge_attr, u, batch)[test].argmax(1) == labels[test]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    gather, scatter = ("x[col]", "row") if bug else ("x[row]", "col")
    return _SCRIPT.replace('__GATHER__', gather).replace('__SCATTER__', scatter)
