"""graph-edges-cross-batch (issue 33, the wild corpus's w190): edges of a batched graph that join nodes of
two different graphs.  Digits as graphs (a node per inked pixel, its intensity and position as features,
edges between inked 4-neighbours: 20-50 nodes per digit), classified by a two-layer message-passing
network over batches of 16 graphs.  Planted: offsets by the previous graph's size (deepchem#3291's bug),
offsets added to the source row only (a PyG-like ``Data`` argument), each with its correct twin; silent:
an integer node-type argument whose name does not say batch, a single graph per batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.graphbatch import find_batch
from tests.guards.helpers import digits, guarded, slugs

SLUG = "graph-edges-cross-batch"


def _graphs(n: int = 320):
    x, y = digits()
    out = []
    for img, label in zip(x[:n], y[:n]):
        grid = img.reshape(8, 8)
        ink = (grid > 0.2).nonzero()
        ids = -torch.ones(8, 8, dtype=torch.long)
        ids[ink[:, 0], ink[:, 1]] = torch.arange(len(ink))
        src, dst = [], []
        for r, c in ink.tolist():
            for dr, dc in ((0, 1), (1, 0)):
                rr, cc = r + dr, c + dc
                if rr < 8 and cc < 8 and ids[rr, cc] >= 0:
                    src += [ids[r, c], ids[rr, cc]]
                    dst += [ids[rr, cc], ids[r, c]]
        feats = torch.stack([grid[ink[:, 0], ink[:, 1]], ink[:, 0] / 7.0, ink[:, 1] / 7.0], 1)
        out.append((feats, torch.tensor([src, dst], dtype=torch.long), int(label)))
    return out


def collate(graphs, offsets="cumulative"):
    sizes = [f.shape[0] for f, _, _ in graphs]
    if offsets == "cumulative":
        shift = [0] + torch.tensor(sizes).cumsum(0)[:-1].tolist()
    else:  # the previous graph's size only
        shift = [0] + sizes[:-1]
    x = torch.cat([f for f, _, _ in graphs])
    edge_index = torch.cat([e + s for (_, e, _), s in zip(graphs, shift)], 1)
    batch = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
    return x, edge_index, batch, torch.tensor([lab for _, _, lab in graphs])


class GNN(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l1, self.n1 = nn.Linear(3, 32), nn.Linear(3, 32)
        self.l2, self.n2 = nn.Linear(32, 32), nn.Linear(32, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, x, edge_index, batch):
        for lin, nbr in ((self.l1, self.n1), (self.l2, self.n2)):
            msg = torch.zeros(x.shape[0], nbr.in_features).index_add_(0, edge_index[1], x[edge_index[0]])
            x = F.relu(lin(x) + nbr(msg))
        n = int(batch.max()) + 1
        pooled = torch.zeros(n, x.shape[1]).index_add_(0, batch, x)
        return self.out(pooled / torch.bincount(batch, minlength=n)[:, None])


class Data:
    """A PyG-like batch: attributes x, edge_index, batch."""

    def __init__(self, x, edge_index, batch):
        self.x, self.edge_index, self.batch = x, edge_index, batch


class DataGNN(GNN):
    def forward(self, data):
        return super().forward(data.x, data.edge_index, data.batch)


def _fit(model, wrap, offsets, batch_size=16, epochs=2, evaluate=True):
    graphs = _graphs()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt)
    for _ in range(epochs):
        for i in range(0, 256, batch_size):
            x, ei, b, y = collate(graphs[i:i + batch_size], offsets)
            loss = F.cross_entropy(wrap(model, x, ei, b), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    if not evaluate:
        return g.report()
    model.eval()
    with torch.no_grad():
        x, ei, b, y = collate(graphs[256:], offsets)
        wrap(model, x, ei, b)
    return g.report()


def _plain(model, x, ei, b):
    return model(x, ei, b)


def test_previous_size_offsets_are_named():
    findings = _fit(GNN(), _plain, "previous")
    assert SLUG in slugs(findings)
    f = next(f for f in findings if f.slug == SLUG)
    assert "cumulative" in f.fix and "test_graph_batch.py" in f.where


def test_cumulative_offsets_are_quiet():
    assert SLUG not in slugs(_fit(GNN(), _plain, "cumulative"))


def _source_row_only(model, x, ei, b):
    # the bug: each graph's offset added to the source row only (the destination row kept its local ids)
    sizes = torch.bincount(b)
    shift = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]])
    local = ei.clone()
    local[1] -= shift[b[ei[0]]]
    return model(Data(x, local, b))


def _data_object(model, x, ei, b):
    return model(Data(x, ei, b))


def test_data_object_with_one_row_shifted_is_named():
    assert SLUG in slugs(_fit(DataGNN(), _source_row_only, "cumulative"))


def test_data_object_twin_is_quiet():
    assert SLUG not in slugs(_fit(DataGNN(), _data_object, "cumulative"))


class TypedGNN(GNN):
    """Node types (an integer per node) beside the features: not a batch vector."""

    def forward(self, x, edge_index, node_type):
        return super().forward(x + node_type[:, None].float() * 0, edge_index, torch.zeros_like(node_type))


def test_integer_node_argument_not_named_batch_is_not_a_batch_vector():
    x = torch.randn(10, 3)
    ei = torch.tensor([[0, 5], [5, 0]])
    types = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    assert find_batch(TypedGNN(), (x, ei, types)) is None
    assert find_batch(GNN(), (x, ei, types)) is not None


def test_one_graph_per_batch_is_quiet():
    assert SLUG not in slugs(_fit(GNN(), _plain, "previous", batch_size=1, epochs=1, evaluate=False))
