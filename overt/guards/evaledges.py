"""Guard on evaluation pairs that are edges of the graph the model is given (slug
``eval-edges-in-input-graph``; issue 33, round eight's w206).

An invariant of link prediction (and of any evaluation that scores pairs of nodes): the pairs a model is
scored on are held out of the structure its forward receives.  A test edge ``(u, v)`` that is also an edge
of the message-passing graph -- ``edge_index`` built from every edge but the validation ones, an
adjacency matrix normalised over the whole edge list -- is aggregated over by the encoder, so the decoder
only has to recognise an edge it was shown: the test score measures memorised structure, and nothing fails
(BUPT-GAMMA/OpenHGNN#91).

What is seen, with no per-step work beyond a checked step's forward:

- the graph: on checked training forwards and on evaluation forwards of a watched model, an integer
  ``edge_index`` of shape ``(2, E)`` among its arguments (the first such, PyG's order) or as the
  ``edge_index`` attribute of an argument (a PyG ``Data``), a square adjacency (dense or sparse COO) whose
  side is the number of rows of the node features the forward receives, and such a tensor held by the
  model (a buffer or tensor attribute) or read by a module's ``forward`` from its module's globals (a
  hand-written GCN over a global ``A``).  References only: no copy, no read of values on the step.
- the evaluation pairs: at the first evaluation forward after each training phase (at most
  :data:`MAX_SCANS`), the user's frames on the stack are looked through for integer tensors of shape
  ``(E, 2)`` or ``(2, E)`` (``E >= MIN_PAIRS``) whose name says test (``test_edges``,
  ``data.test_pos_edge_index``: one level into plain objects) or validation.

Judged once, at the end of the run: reported when at least :data:`FAIL_SHARE` of a test set's pairs are
edges (either orientation) of a graph the model received in training or evaluation, or of a validation
set's pairs of a graph it received in training before that validation pass (at test time a graph that
holds the validation edges is PyG's own protocol).  Silent where the premise cannot be proved: the graph
no larger than the pair set (an inductive test graph named ``test_edge_index`` is the structure, not the
scored pairs), a dense matrix with more than a quarter of its entries set (a mask, not a sparse graph),
node ids (transductive node classification scores nodes, not edges, on a graph shared by design), pairs
under other names, graphs rebuilt inside ``forward`` (self-supervised edge masking), a forward with no
floating-point node features (an integer ``(2, L)`` argument may be two rows of token ids), and ids beyond
the node count.
"""

from __future__ import annotations

import re
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import is_user_file, user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

MIN_PAIRS = 16
FAIL_SHARE = 0.9
MAX_SCANS = 8  # evaluation phases whose frames are looked through
MAX_GRAPHS = 16  # distinct graph tensors kept (references)
MAX_NODES = 1 << 14  # side of a dense adjacency read at the end
MAX_DENSITY = 0.25
MAX_ATTRS = 64  # attributes of an object looked through for evaluation pairs
_TEST = {"test", "tst", "holdout", "heldout"}
_VAL = {"val", "valid", "validation", "dev"}
_NOT_PAIRS = {"neg", "negative", "negatives", "false", "graph", "adj", "adjacency", "message", "mp"}


def _role(name: str) -> str | None:
    words = set(re.split(r"[^a-z]+", name.lower()))
    if words & _NOT_PAIRS:
        return None
    return "test" if words & _TEST else "validation" if words & _VAL else None


def _pairs_tensor(v: Any) -> bool:
    """An integer tensor of node pairs, (E, 2) or (2, E)."""
    return (isinstance(v, torch.Tensor) and v.dim() == 2 and not v.is_floating_point() and not v.is_complex()
            and v.dtype != torch.bool and v.layout == torch.strided and v.device.type != "meta"
            and 2 in v.shape and max(v.shape) >= MIN_PAIRS)


def _edge_index(v: Any) -> bool:
    return (isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape[0] == 2 and v.shape[1] >= MIN_PAIRS
            and not v.is_floating_point() and not v.is_complex() and v.dtype != torch.bool
            and v.layout == torch.strided and v.device.type != "meta")


def _adjacency(v: Any, n: int | None) -> bool:
    """A square matrix over the n nodes that is data, not computed (no autograd graph is kept alive)."""
    return (isinstance(v, torch.Tensor) and not v.requires_grad and v.dim() == 2
            and n is not None and n >= MIN_PAIRS and v.shape[0] == v.shape[1] == n and n <= MAX_NODES
            and v.layout in (torch.strided, torch.sparse_coo) and v.device.type != "meta" and not v.is_complex())


def _nodes(args: tuple) -> tuple[int | None, Any]:
    """Rows of the node features (the first floating-point 2-D argument) and that argument."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.dim() == 2 and a.is_floating_point():
            return a.shape[0], a
        x = getattr(a, "x", None)  # a PyG Data
        if isinstance(x, torch.Tensor) and x.dim() == 2:
            return x.shape[0], x
    return None, None


def _graph_pairs(g: torch.Tensor) -> torch.Tensor | None:
    """The graph's edges as an (E, 2) long tensor on the CPU (self-loops dropped), or None."""
    with torch.no_grad():
        if g.layout == torch.sparse_coo:
            e = g.coalesce().indices().t()
        elif g.dim() == 2 and g.shape[0] == g.shape[1] and (g.is_floating_point() or g.dtype == torch.bool):
            nz = g != 0
            if nz.sum().item() > MAX_DENSITY * g.numel():
                return None  # a mask or a dense similarity, not a sparse graph
            e = nz.nonzero()
        elif g.dim() == 2 and g.shape[0] == 2:
            e = g.t()
        else:
            return None
        e = e.long().cpu()
        return e[e[:, 0] != e[:, 1]]


def _named_values(names: dict) -> list[tuple[str, Any]]:
    """A frame's names, and one level into the plain objects among them (``data.test_pos_edge_index`` of a
    graph object, as PyG's ``train_test_split_edges`` leaves it; PyG keeps a ``Data``'s attributes in its
    ``_store``): no module, no class, no object of more than :data:`MAX_ATTRS` attributes."""
    out = list(names.items())
    for k, v in list(names.items()):
        if isinstance(v, (torch.Tensor, torch.nn.Module, type, types.ModuleType)) or not hasattr(v, "__dict__"):
            continue
        try:
            attrs = vars(v)
            store = attrs.get("_store")
            if store is not None and hasattr(store, "items") and not isinstance(store, type):
                attrs = store
            items = list(attrs.items()) if len(attrs) <= MAX_ATTRS else []
        except Exception:  # an object whose attributes cannot be listed: not looked into
            continue
        out += [(f"{k}.{a}", t) for a, t in items if isinstance(a, str) and isinstance(t, torch.Tensor)]
    return out


class EvalEdgeChecks(Check):
    name = "evaledges"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.graphs: list[tuple[int, str, str, torch.Tensor, int]] = []  # (order, phase, source, tensor, nodes)
        self.scored: list[tuple[int, str, str, str, torch.Tensor]] = []  # (order, role, name, where, tensor)
        self.held: dict[int, list[tuple[dict, str, str]]] = {}  # id(model) -> (namespace, name, reader)
        self.order = 0
        self.scans = 0
        self.scanned_at: int | None = None  # the training step of the latest scan

    # -- the graph ------------------------------------------------------------------------
    def _holders(self, info: ModelInfo) -> list[tuple[dict, str, str]]:
        """Where a model keeps graph-shaped tensors besides its arguments: module attributes and
        buffers, and the globals its modules' ``forward`` read (found once per model)."""
        found = self.held.get(id(info.module))
        if found is not None:
            return found
        found = []
        seen: set[tuple[int, str]] = set()
        for m in info.module.modules():
            for k, v in list(vars(m).items()) + list(m._buffers.items()):
                if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and v.dim() == 2 \
                        and (id(m), k) not in seen:
                    seen.add((id(m), k))
                    found.append((m._buffers if k in m._buffers else vars(m), k, f"{type(m).__name__}.{k}"))
            fwd = getattr(type(m), "forward", None)
            code = getattr(fwd, "__code__", None)
            glb = getattr(fwd, "__globals__", None)
            if code is None or glb is None or not is_user_file(code.co_filename):
                continue
            for k in code.co_names:
                v = glb.get(k)
                if isinstance(v, torch.Tensor) and v.dim() == 2 and (id(glb), k) not in seen:
                    seen.add((id(glb), k))
                    found.append((glb, k, f"the global {k} read by {type(m).__name__}.forward"))
        self.held[id(info.module)] = found
        return found

    def _keep_graphs(self, info: ModelInfo, args: tuple, phase: str) -> None:
        n, features = _nodes(args)
        if n is None:
            return  # no node features: an integer (2, E) argument may be two rows of token ids
        cands: list[tuple[str, Any]] = []
        first = next((a for a in args if _edge_index(a)), None)
        if first is not None:
            cands.append((f"the edge_index argument of {info.name}", first))
        for a in args:
            e = getattr(a, "edge_index", None) if not isinstance(a, torch.Tensor) else None
            if _edge_index(e):
                cands.append((f"{type(a).__name__}.edge_index given to {info.name}", e))
            if a is not features and _adjacency(a, n):
                cands.append((f"the adjacency argument of {info.name}", a))
        for ns, k, reader in self._holders(info):
            v = ns.get(k)
            if v is not features and (_edge_index(v) or _adjacency(v, n)):
                cands.append((reader, v))
        for source, g in cands:
            if any(kept is g and p == phase for _, p, _, kept, _ in self.graphs) or len(self.graphs) >= MAX_GRAPHS:
                continue
            self.order += 1
            self.graphs.append((self.order, phase, source, g, n))

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        self._keep_graphs(info, args, "training")

    # -- the evaluation pairs -----------------------------------------------------------------
    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        self._evaluation(info, args)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        if info.module.training:  # (eval-mode forwards are seen above, with their arguments)
            self._evaluation(info, ())

    def eval_looks_left(self, info: ModelInfo) -> bool:
        return self.scans < MAX_SCANS and self.scanned_at != self.s.step  # one look per evaluation phase

    def _evaluation(self, info: ModelInfo, args: tuple) -> None:
        if self.scanned_at == self.s.step or self.scans >= MAX_SCANS:
            return
        self.scanned_at = self.s.step
        self.scans += 1
        self._keep_graphs(info, args, "evaluation")
        where = user_location(1) or info.name
        frame = sys._getframe(1)
        seen: set[int] = {id(r[4]) for r in self.scored}
        while frame is not None:
            if is_user_file(frame.f_code.co_filename):
                for k, v in _named_values(frame.f_locals):
                    role = _role(k) if _pairs_tensor(v) else None
                    if role and id(v) not in seen:
                        seen.add(id(v))
                        self.order += 1
                        self.scored.append((self.order, role, k, where, v))
            frame = frame.f_back

    # -- the verdict ----------------------------------------------------------------------------
    def end_of_run(self) -> None:
        if not self.scored or not self.graphs:
            return
        edges: dict[int, torch.Tensor | None] = {}
        for order, role, name, where, p in self.scored:
            pairs = (p.t() if p.shape[0] == 2 and p.shape[1] != 2 else p).long().cpu()
            pairs = torch.unique(pairs[pairs[:, 0] != pairs[:, 1]], dim=0)  # distinct node pairs
            if len(pairs) < MIN_PAIRS or int(pairs.min()) < 0:
                continue
            for g_order, phase, source, g, n in self.graphs:
                if g is p or (role == "validation" and (phase != "training" or g_order > order)):
                    continue
                if id(g) not in edges:
                    edges[id(g)] = _graph_pairs(g)
                e = edges[id(g)]
                if e is None or len(e) <= len(pairs) or int(e.min()) < 0 or int(e.max()) >= n \
                        or int(pairs.max()) >= n:
                    continue  # no larger than the pairs (the structure itself), or not ids of the n nodes
                m = n
                keys = torch.cat((e[:, 0] * m + e[:, 1], e[:, 1] * m + e[:, 0]))
                inside = int(torch.isin(pairs[:, 0] * m + pairs[:, 1], keys).sum())
                if inside >= FAIL_SHARE * len(pairs):
                    self._report(role, name, where, len(pairs), inside, phase, source)
                    return

    def _report(self, role: str, name: str, where: str, n: int, inside: int, phase: str, source: str) -> None:
        self.s.report(
            "eval-edges-in-input-graph",
            f"{inside} of the {n} {role} pairs in {name} (seen at the evaluation forward at {where}) are edges of "
            f"the graph the model was given in {phase} ({source}): the encoder aggregates over every edge it is "
            f"then asked to predict, so the {role} score measures recognition of edges it was shown, not "
            "prediction of held-out ones, and reads far better than the model does on unseen links.",
            fix=f"remove the {role} edges (both directions) from the message-passing graph before training and "
            "evaluating: build edge_index / the adjacency from the training edges only (at test time, the "
            "training and validation edges), e.g. torch_geometric.transforms.RandomLinkSplit, which keeps "
            "edge_label_index out of edge_index.",
            where=f"{name} at {where}", key=name)
