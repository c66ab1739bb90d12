"""A graph convolutional network trained without self-loops: the normalised adjacency
``D^-1/2 A D^-1/2`` is built from the edges alone, so each layer replaces a node's features with the
mean of its neighbours' and the node's own features never reach its prediction directly.

Source: pmernyei/wiki-cs-dataset#4 (https://github.com/pmernyei/wiki-cs-dataset/issues/4), "Missing
self-loops in dataset loader?": "you reported the evaluation as being performed with self-loops added
to the graph. However, in the `from_file` data loading function ... I don't believe self-loops are
being added anywhere" (with `dgl.add_self_loop`, "I get an average accuracy of 79.08% for GCN");
maintainer: "You seem to be quite right unfortunately - I am very sorry for such an embarrassing
mistake."  Here the nodes are the 1797 digits (pixel features), each linked to one random node of
its class and three random nodes of any class (a weakly homophilous graph); a two-layer GCN is
trained on the first 1400 nodes' labels (full batch) and tested on the rest.  The twin adds the
self-loops (``A + I``) before normalising.

Metric: test-node accuracy (plain ``python``, CPU, seed 0): bug 0.7607, twin 0.8161.
"""

REPORT = "N56"
MECHANISM = "graph-self-loops-missing"
SLUGS = ()
METRIC = ("test_node_accuracy", 0.7607, 0.8161)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
digits = load_digits()
X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(digits.target)
N = len(Y)
g = torch.Generator().manual_seed(1)
order = torch.argsort(Y)
counts = torch.bincount(Y)
start = torch.cumsum(counts, 0) - counts
same = order[start[Y] + (torch.rand(N, generator=g) * counts[Y]).long()]
other = torch.randint(N, (N, 3), generator=g)
nodes = torch.arange(N).repeat_interleave(4)
neighbours = torch.cat([same[:, None], other], 1).flatten()
keep = nodes != neighbours
src, dst = torch.cat([nodes[keep], neighbours[keep]]), torch.cat([neighbours[keep], nodes[keep]])
edges = torch.unique(torch.stack([src, dst]), dim=1)
SELF_LOOPS = __SELF_LOOPS__
if SELF_LOOPS:
    edges = torch.cat([edges, torch.arange(N).repeat(2, 1)], dim=1)
deg = torch.bincount(edges[0], minlength=N).float()
norm = deg[edges[0]].rsqrt() * deg[edges[1]].rsqrt()
A_hat = torch.sparse_coo_tensor(edges, norm, (N, N), check_invariants=True).coalesce()


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(64, 64)
        self.lin2 = nn.Linear(64, 10)

    def forward(self, x, adj):
        h = F.relu(torch.sparse.mm(adj, self.lin1(x)))
        return torch.sparse.mm(adj, self.lin2(F.dropout(h, 0.3, self.training)))


model = GCN()
opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
#@guard
train = torch.arange(N) < 1400
for step in range(150):
    opt.zero_grad()
    F.cross_entropy(model(X, A_hat)[train], Y[train]).backward()
    opt.step()
model.eval()
with torch.no_grad():
    acc = (model(X, A_hat).argmax(1)[~train] == Y[~train]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SELF_LOOPS__", "False" if bug else "True")
