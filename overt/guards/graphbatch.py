"""Guard on batched graphs whose edges join nodes of different graphs (slug ``graph-edges-cross-batch``;
issue 33, the wild corpus's w190).

An invariant of every correct graph batch: several graphs batched as one disconnected graph (PyG's
``Batch``, DGL's ``batch``, a hand-written collate that concatenates node features and shifts each
graph's ``edge_index`` by the number of nodes before it) keep every edge inside its own graph.  The
batch vector says which graph each node belongs to, so ``batch[src] == batch[dst]`` for every edge.
An offset that is not the cumulative node count (the previous graph's size only, deepchem#3291), an
off-by-one, offsets added to one row of ``edge_index`` only, node features concatenated in another
order than the edges: each joins nodes of different graphs, message passing mixes the molecules of a
batch, and training and evaluation run with no error because every index stays in range.

What is seen: checked training forwards among a model's first 12 and evaluation-mode forwards of a watched model whose
arguments hold node features (a floating-point tensor of ``N`` rows), an ``edge_index`` (an integer
``(2, E)`` tensor) and a batch vector (a 1-D integer tensor of length ``N`` passed to a parameter whose
name says batch or graph, or a ``batch`` attribute of a PyG-like ``Data`` argument holding ``x`` and
``edge_index``).  A few device reductions are queued with the session's deferred reads (no host read on
the step): whether the batch vector is sorted, starts at 0 and steps by 0 or 1 (graph ids, as every
batching writes them), whether every edge index is in ``[0, N)``, and how many edges join two graphs.
Reported when a valid batch vector of at least two graphs has an edge that crosses; silent when the
vector is not graph ids, when an index is out of range (bipartite or other node sets), and on
forwards without all three.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 4  # forwards judged per model
EARLY = 12  # training forwards of a model (counted from when it is watched) that may be looked at
MISSES = 3  # forwards without a batched graph before a model is looked at no more
_BATCH_WORDS = ("batch", "graph", "segment", "node2graph")


def _int_tensor(v: Any) -> bool:
    return (isinstance(v, torch.Tensor) and not v.is_floating_point() and not v.is_complex()
            and v.dtype != torch.bool and v.layout == torch.strided and v.device.type != "meta")


def _edge_index(v: Any) -> bool:
    return _int_tensor(v) and v.dim() == 2 and v.shape[0] == 2 and v.shape[1] >= 1


def _named_args(module: torch.nn.Module, args: tuple) -> list[tuple[str, Any]]:
    """The forward's positional arguments with the names of the parameters they bind to ('' when unknown)."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [(params[i].name if i < len(params) else "", a) for i, a in enumerate(args)]


def find_batch(module: torch.nn.Module, args: tuple) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(node features, edge_index, batch vector) of a batched-graph forward, or None."""
    for a in args:  # a PyG-like Data / Batch object
        if isinstance(a, torch.Tensor):
            continue
        x, e, b = getattr(a, "x", None), getattr(a, "edge_index", None), getattr(a, "batch", None)
        if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.is_floating_point() and _edge_index(e) \
                and _int_tensor(b) and b.dim() == 1 and b.shape[0] == x.shape[0]:
            return x, e, b
    if not any(_edge_index(a) for a in args):
        return None
    named = _named_args(module, args)
    x = next((a for _, a in named if isinstance(a, torch.Tensor) and a.dim() >= 2 and a.is_floating_point()), None)
    e = next((a for _, a in named if _edge_index(a)), None)
    if x is None or e is None:
        return None
    n = x.shape[0]
    cands = [a for name, a in named
             if _int_tensor(a) and a.dim() == 1 and a.shape[0] == n and any(w in name.lower() for w in _BATCH_WORDS)]
    return (x, e, cands[0]) if len(cands) == 1 and n >= 2 else None


class GraphBatchChecks(Check):
    name = "graphbatch"

    def __init__(self, session: Any):
        super().__init__(session)
        self.counts: dict[tuple[int, str], list[int]] = {}  # (id(ModelInfo), phase) -> [judged, misses]
        self.done: set[tuple[int, str]] = set()  # (id(ModelInfo), phase) looked at no more

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if info.forwards <= EARLY:  # a training batch of the first steps is a fair sample of the batching
            self._look(info, args, "training")

    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        if (id(info), "evaluation") not in self.done:
            self._look(info, args, "evaluation")

    def eval_looks_left(self, info: ModelInfo) -> bool:
        return (id(info), "evaluation") not in self.done

    def _look(self, info: ModelInfo, args: tuple, phase: str) -> None:
        key = (id(info), phase)
        if key in self.done:
            return
        counts = self.counts.setdefault(key, [0, 0])
        found = find_batch(info.module, args)
        if found is None:
            counts[1] += 1
            if counts[1] >= MISSES:
                self.done.add(key)  # not a batched-graph model: looked at no more
            return
        counts[0] += 1
        if counts[0] >= LOOKS:
            self.done.add(key)
        x, e, b = found
        n = x.shape[0]
        with torch.no_grad():
            b = b.detach().long()
            e = e.detach().long()
            steps = b[1:] - b[:-1]
            ids_ok = (b[0] == 0) & ((steps == 0) | (steps == 1)).all()
            graphs = b[-1] + 1
            in_range = (e.min() >= 0) & (e.max() < n)
            e_safe = e.clamp(0, n - 1).to(b.device)
            cross = b[e_safe[0]] != b[e_safe[1]]
            first = torch.argmax(cross.to(torch.int8))
            pair = e_safe[:, first]
            values = torch.stack([ids_ok.long(), graphs.long(), in_range.long().to(b.device), cross.sum().long(),
                                  pair[0], pair[1], b[pair[0]], b[pair[1]]])
        where = user_location(1) or info.name
        self.s.defer(values, self._judge(info, phase, e.shape[1], n, where))

    def _judge(self, info: ModelInfo, phase: str, edges: int, nodes: int, where: str):
        def callback(values: list) -> None:
            ids_ok, graphs, in_range, crossing, src, dst, g_src, g_dst = (int(v) for v in values)
            if not ids_ok or graphs < 2 or not in_range or crossing == 0:
                return
            self.s.report(
                "graph-edges-cross-batch",
                f"in a {phase} forward of {info.name}, {crossing} of the {edges} edges of a batch of {graphs} "
                f"graphs ({nodes} nodes) join nodes of two different graphs (e.g. node {src} of graph {g_src} "
                f"to node {dst} of graph {g_dst}, by the batch vector): the offset added to a graph's edge_index is "
                "not the number of nodes of the graphs before it (or nodes and edges were concatenated in "
                "different orders), so message passing mixes "
                "the graphs of a batch and every prediction depends on its batch mates, in training and in "
                "evaluation, with no error (every index stays in range).",
                fix="shift graph k's edge_index by the cumulative node count of graphs 0..k-1 (offsets = "
                "[0] + cumsum(sizes)[:-1], not the previous graph's size), or batch with "
                "torch_geometric.data.Batch.from_data_list, which does it.",
                where=where, key=info.name)

        return callback
