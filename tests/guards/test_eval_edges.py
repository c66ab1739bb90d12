"""eval-edges-in-input-graph (issue 33, round eight's w206): evaluation pairs that are edges of the graph the
model is given.  Link prediction on the 5-nearest-neighbour graph of sklearn's digits, its edges split
80/10/10 by a seeded draw, in four forms: a PyG-style ``edge_index`` argument (``overt.guard``), a ``Data``-like
argument's ``edge_index``, a dense
adjacency argument (``overt run``), a sparse adjacency held as the model's buffer with the validation edges
left in it; each with its clean twin, and two graphs shared by design (transductive node classification, an
inductive test graph named ``test_edge_index``) that stay silent."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING, run_overt
from tests.guards.helpers import digits, guarded, slugs


def _knn_edges():
    """The undirected 5-NN graph of digits as (E, 2) pairs u < v, split 80/10/10 by a seeded draw."""
    x, _ = digits()
    d = torch.cdist(x, x)
    d.fill_diagonal_(float("inf"))
    nn_idx = d.topk(5, largest=False).indices
    pairs = torch.stack([torch.arange(len(x)).repeat_interleave(5), nn_idx.reshape(-1)], 1)
    pairs = torch.unique(pairs.sort(1).values, dim=0)
    perm = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(0))
    n = len(pairs) // 10
    return x, pairs[perm[2 * n:]], pairs[perm[:n]], pairs[perm[n:2 * n]]


def _both_ways(pairs):
    return torch.cat([pairs, pairs.flip(1)]).t().contiguous()  # (2, 2E)


class _EdgeGCN(nn.Module):
    """Two mean-aggregation layers over an ``edge_index`` argument (PyG's convention), by hand."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(64, 32), nn.Linear(32, 16)

    @staticmethod
    def _mean(h, edge_index):
        src, dst = edge_index
        out = torch.zeros_like(h).index_add_(0, dst, h[src])
        deg = torch.zeros(len(h)).index_add_(0, dst, torch.ones(len(dst))).clamp(min=1)
        return h + out / deg[:, None]

    def forward(self, x, edge_index):
        return self.l2(self._mean(F.relu(self.l1(self._mean(x, edge_index))), edge_index))


def _bce(z, pos):
    neg = torch.randint(0, len(z), pos.shape)
    logits = torch.cat([(z[pos[:, 0]] * z[pos[:, 1]]).sum(1), (z[neg[:, 0]] * z[neg[:, 1]]).sum(1)])
    return F.binary_cross_entropy_with_logits(logits, torch.cat([torch.ones(len(pos)), torch.zeros(len(neg))]))


def _edge_index_run(leak):
    torch.manual_seed(0)
    x, train_edges, val_edges, test_edges = _knn_edges()
    test_pos_edge_index = test_edges.t().contiguous()  # PyG's train_test_split_edges names it so
    edge_index = _both_ways(torch.cat([train_edges, test_edges]) if leak else train_edges)
    del val_edges, test_edges  # only the (2, E) form is left to be found
    model = _EdgeGCN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(12):
        opt.zero_grad()
        _bce(model(x, edge_index), train_edges).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        z = model(x, edge_index)
        (z[test_pos_edge_index[0]] * z[test_pos_edge_index[1]]).sum(1)
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("leak", [True, False])
def test_edge_index_argument_holding_the_test_edges(leak):
    findings, text = _edge_index_run(leak)
    if leak:
        assert slugs(findings) == ["eval-edges-in-input-graph"], text
        assert "test pairs in test_pos_edge_index" in text
        assert "the edge_index argument of _EdgeGCN" in text
        assert "test_eval_edges.py:" in text  # the evaluation forward's line
    else:
        assert findings == [], text


class _Graph:
    """A PyG ``Data``-like object: node features and an ``edge_index``."""

    def __init__(self, x, edge_index):
        self.x, self.edge_index = x, edge_index


class _DataGCN(_EdgeGCN):
    def forward(self, data):
        return super().forward(data.x, data.edge_index)


@pytest.mark.parametrize("leak", [True, False])
def test_data_object_whose_edge_index_holds_the_test_edges(leak):
    """The test edges kept as an attribute of the graph object, as PyG's train_test_split_edges leaves them."""
    torch.manual_seed(0)
    x, train_edges, val_edges, test_edges = _knn_edges()
    data = _Graph(x, _both_ways(torch.cat([train_edges, test_edges]) if leak else train_edges))
    data.test_pos_edge_index = test_edges.t().contiguous()
    del val_edges, test_edges
    model = _DataGCN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(8):
        opt.zero_grad()
        _bce(model(data), train_edges).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        z = model(data)
        (z[data.test_pos_edge_index[0]] * z[data.test_pos_edge_index[1]]).sum(1)
    findings, text = g.report(), g.session.options.stream.getvalue()
    if leak:
        assert slugs(findings) == ["eval-edges-in-input-graph"], text
        assert "test pairs in data.test_pos_edge_index" in text and "_Graph.edge_index given to _DataGCN" in text
    else:
        assert findings == [], text


class _SparseGCN(nn.Module):
    """A GCN whose normalised adjacency is a sparse buffer built in ``__init__``."""

    def __init__(self, n, edges):
        super().__init__()
        ij = torch.cat([edges, edges.flip(1), torch.arange(n)[:, None].repeat(1, 2)]).t()
        deg = torch.zeros(n).index_add_(0, ij[0], torch.ones(ij.shape[1]))
        vals = deg[ij[0]].rsqrt() * deg[ij[1]].rsqrt()
        self.register_buffer("adj", torch.sparse_coo_tensor(ij, vals, (n, n)).coalesce())
        self.l1, self.l2 = nn.Linear(64, 32), nn.Linear(32, 16)

    def forward(self, x):
        return self.l2(torch.sparse.mm(self.adj, F.relu(self.l1(torch.sparse.mm(self.adj, x)))))


@pytest.mark.parametrize("leak", [True, False])
def test_sparse_buffer_holding_the_validation_edges(leak):
    torch.manual_seed(0)
    x, train_edges, val_edges, test_edges = _knn_edges()
    model = _SparseGCN(len(x), torch.cat([train_edges, val_edges]) if leak else train_edges)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        for _ in range(4):
            opt.zero_grad()
            _bce(model(x), train_edges).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            z = model(x)
            (z[val_edges[:, 0]] * z[val_edges[:, 1]]).sum(1)
        model.train()
    findings, text = g.report(), g.session.options.stream.getvalue()
    if leak:
        assert slugs(findings) == ["eval-edges-in-input-graph"], text
        assert "validation pairs in val_edges" in text and "_SparseGCN.adj" in text
    else:
        assert findings == [], text


def test_transductive_node_classification_stays_silent():
    """Test nodes, not edges, are scored on the whole graph: a graph shared by design."""
    torch.manual_seed(0)
    x, y = digits()
    edge_index = _both_ways(torch.cat(_knn_edges()[1:]))  # every edge: the graph is the input
    test_idx = torch.arange(1500, len(x))
    model, head = _EdgeGCN(), nn.Linear(16, 10)
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(8):
        opt.zero_grad()
        F.cross_entropy(head(model(x, edge_index))[:1500], y[:1500]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        head(model(x, edge_index))[test_idx].argmax(1)
    assert g.report() == [], g.session.options.stream.getvalue()


def test_inductive_test_graph_named_test_stays_silent():
    """An inductive split by nodes: the test graph, given to the forward as ``test_edge_index``, is the
    structure of unseen nodes (ids from 0 again), not pairs held out of the training graph."""
    torch.manual_seed(0)
    x, _, _, _ = _knn_edges()
    pairs = torch.cat(_knn_edges()[1:])
    inside = pairs < 1200
    train_edge_index = _both_ways(pairs[inside.all(1)])
    test_edge_index = _both_ways(pairs[~inside.any(1)] - 1200)
    x_train, x_test = x[:1200], x[1200:]
    model = _EdgeGCN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(8):
        opt.zero_grad()
        _bce(model(x_train, train_edge_index), train_edge_index.t()).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        z = model(x_test, test_edge_index)
        (z[test_edge_index[0]] * z[test_edge_index[1]]).sum(1)
    assert g.report() == [], g.session.options.stream.getvalue()


_DENSE = """
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

torch.manual_seed(0)
x = torch.tensor(load_digits().data, dtype=torch.float32) / 16.0
n = len(x)
d = torch.cdist(x, x)
d.fill_diagonal_(float("inf"))
pairs = torch.stack([torch.arange(n).repeat_interleave(5), d.topk(5, largest=False).indices.reshape(-1)], 1)
pairs = torch.unique(pairs.sort(1).values, dim=0)
perm = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(0))
k = len(pairs) // 10
train_pairs, test_pairs = pairs[perm[k:]], pairs[perm[:k]]


def adjacency(p):
    a = torch.zeros(n, n)
    a[p[:, 0], p[:, 1]] = 1
    a = a + a.T + torch.eye(n)
    s = a.sum(1).rsqrt()
    return s[:, None] * a * s[None, :]


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(64, 32), nn.Linear(32, 16)

    def forward(self, x, adj):
        return self.l2(adj @ F.relu(self.l1(adj @ x)))


def main():
    adj = adjacency(__GRAPH__)
    model = GCN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(12):
        z = model(x, adj)
        neg = torch.randint(0, n, train_pairs.shape)
        logits = torch.cat([(z[train_pairs[:, 0]] * z[train_pairs[:, 1]]).sum(1),
                            (z[neg[:, 0]] * z[neg[:, 1]]).sum(1)])
        target = torch.cat([torch.ones(len(train_pairs)), torch.zeros(len(neg))])
        loss = F.binary_cross_entropy_with_logits(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        z = model(x, adj)
        print("test score", (z[test_pairs[:, 0]] * z[test_pairs[:, 1]]).sum(1).mean().item())


main()
"""


@pytest.mark.parametrize("leak", [True, False])
def test_dense_adjacency_argument_under_overt_run(tmp_path, leak):
    script = tmp_path / "link.py"
    script.write_text(textwrap.dedent(_DENSE).replace("__GRAPH__", "pairs" if leak else "train_pairs"))
    report = tmp_path / "r.json"
    proc = run_overt("run", "--ignore", ",".join(TIMING), "--report", str(report), str(script), cwd=tmp_path)
    found = [f["slug"] for f in json.loads(report.read_text())["findings"]]
    if leak:
        assert proc.returncode == 1, proc.stderr
        assert found == ["eval-edges-in-input-graph"], proc.stderr
        assert "test pairs in test_pairs" in proc.stderr and "link.py:" in proc.stderr
        assert "the adjacency argument of GCN" in proc.stderr
    else:
        assert proc.returncode == 0 and found == [], proc.stderr
