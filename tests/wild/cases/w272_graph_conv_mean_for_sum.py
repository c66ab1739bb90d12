"""A graph convolution that averages its neighbours' messages where the operator sums them: with ``mean``
aggregation the layer sees the share of neighbours of a kind, not their number, so anything that depends
on a node's neighbourhood size is out of its reach -- with no error.

Source: pyg-team/pytorch_geometric#248 (https://github.com/pyg-team/pytorch_geometric/issues/248),
"GMMConv uses MessagePassing Layer with mean aggregation": "it inherits from its parent class MessagePassing
and is initialized with mean aggregation. To my understanding, the aggregation function should be `add`, as
the aggregation is summing up over the neighboring vertices"; maintainer: "Yes, you are right. Those are two
different things. Sorry for the inconvenience. Will fix it ASAP." (then "I just pushed a new `GMMConv` to
master which fixes this bug").  Here one message-passing layer (linear messages, a root term) and a small
head regress, for every node of random graphs (60 nodes, edge probability 0.08), the number of its
neighbours that carry a flag; the layer is built with ``aggr="mean"`` in the buggy script and
``aggr="add"`` in the twin.  GMMConv's Gaussian-mixture edge weights are not reproduced.

Metric: test MSE (plain ``python``, CPU, seed 0): bug 1.3391, twin 0.0002 (lower is better)
"""

REPORT = "N246"
MECHANISM = "neighbour-aggregation-mean-for-sum"
SLUGS = ()
METRIC = ("test_mse", 1.3391, 0.0002)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def random_graph(n=60, p=0.08):
    adj = torch.rand(n, n) < p
    adj = adj | adj.T
    adj.fill_diagonal_(False)
    src, dst = adj.nonzero().T
    x = (torch.rand(n, 1) < 0.4).float()
    y = torch.zeros(n).index_add_(0, dst, x[src, 0])
    return x, src, dst, y


class GraphConv(nn.Module):
    def __init__(self, dim_in, dim_out, aggr):
        super().__init__()
        self.aggr = aggr
        self.msg = nn.Linear(dim_in, dim_out)
        self.root = nn.Linear(dim_in, dim_out)

    def forward(self, x, src, dst):
        m = self.msg(x)[src]
        out = torch.zeros(len(x), m.shape[1]).index_add_(0, dst, m)
        if self.aggr == "mean":
            deg = torch.zeros(len(x)).index_add_(0, dst, torch.ones(len(dst))).clamp(min=1)
            out = out / deg[:, None]
        return out + self.root(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = GraphConv(1, 32, aggr="__AGGR__")
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x, src, dst):
        return self.head(self.conv(x, src, dst)).squeeze(1)


train = [random_graph() for _ in range(100)]
test = [random_graph() for _ in range(50)]
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(8):
    for x, src, dst, y in train:
        loss = F.mse_loss(model(x, src, dst), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    mse = sum(F.mse_loss(model(x, s, d), y).item() for x, s, d, y in test) / len(test)
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__AGGR__', 'mean' if bug else 'add')
    return s
