"""A stochastic-block-model dataset that gives its block-sorted nodes the rows of ``make_classification`` in the
order they come out, which with two clusters per class is not sorted by class: the features of many nodes belong to
another block, and a graph network learns a worse node classifier -- nothing fails.

Source: pyg-team/pytorch_geometric#4617 (https://github.com/pyg-team/pytorch_geometric/pull/4617):
``StochasticBlockModelDataset`` uses ``make_classification(..., shuffle=False)``, whose output "is not sorted with
respect to the labels" when ``n_clusters_per_class`` > 1, so features are assigned to the wrong blocks (labels: bug,
P0; merged; the fix sorts the rows by their class). Here four blocks of 30, 90, 50 and 70 nodes, edges drawn with
in-block probability 0.05 and cross-block 0.02, eight features per node from ``make_classification`` with class
weights equal to the blocks' shares and two clusters per class, and a two-layer dense GCN trained on half of the
nodes; the bug takes the rows as they come (every class's first cluster, then every class's second, so the block
boundaries cut through clusters and one cluster's nodes sit in two blocks), the twin sorts them by their class first.
The reproduction uses a dense normalised adjacency instead of PyG's ``GCNConv``. (With four equal blocks the
clusters would map one to one onto blocks in either order, and the bug would only relabel them.)

Metric: test accuracy on the other half of the nodes (plain ``python``, CPU, seed 0): bug 0.6833, twin 0.8083
"""

REPORT = "N374"
MECHANISM = "block-features-not-sorted-by-class"
SLUGS = ()
METRIC = ('test_accuracy', 0.6833, 0.8083)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import make_classification

torch.manual_seed(0)
block_sizes = [30, 90, 50, 70]
n = sum(block_sizes)
y = torch.cat([torch.full((s,), i) for i, s in enumerate(block_sizes)])
probs = torch.full((4, 4), 0.02) + 0.03 * torch.eye(4)
p = probs[y][:, y]
adj = (torch.rand(n, n) < p).float().triu(1)
adj = adj + adj.t() + torch.eye(n)
deg = adj.sum(1)
a_hat = adj / deg.sqrt()[:, None] / deg.sqrt()[None, :]
x, x_y = make_classification(n_samples=n, n_features=8, n_informative=8, n_redundant=0, n_classes=4,
                             n_clusters_per_class=2, weights=[s / n for s in block_sizes], flip_y=0.0, shuffle=False,
                             class_sep=3.0, random_state=0)
__SORT__x = torch.tensor(x, dtype=torch.float32)
perm = torch.randperm(n)
tr, te = perm[:n // 2], perm[n // 2:]


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 32), nn.Linear(32, 4)

    def forward(self, x):
        return a_hat @ self.l2(F.relu(a_hat @ self.l1(x)))


model = GCN()
opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
#@guard
for epoch in range(150):
    loss = F.cross_entropy(model(x)[tr], y[tr])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(x)[te].argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    sort = '' if bug else "x = x[x_y.argsort(kind='stable')]\n"
    return _SCRIPT.replace('__SORT__', sort)
