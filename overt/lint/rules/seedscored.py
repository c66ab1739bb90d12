"""``eval-samples-repeated`` in the code: an evaluation over batches of seed items that scores the batch's
context items too (issue 33, each evaluation item scored once; pyg-team/pytorch_geometric#7372, w225).

A neighbour-sampled batch holds its seed nodes first and then the neighbours sampled for them
(``NeighborLoader``, ``HGTLoader``, or a hand-written sampler that returns ``torch.cat([seeds, neighbours])``).
The model predicts for every node of the subgraph, but only the first ``batch_size`` are the batch's
evaluation items: comparing the predictions with the labels of the whole batch scores each sampled
neighbour as well -- nodes outside the evaluation set among them, and every node again in each batch that
samples it -- so the metric counts more predictions than the evaluation set has items
and is not the metric over that set.

Proven from the code, in an evaluation loop (under ``no_grad``):

- a loop over a ``NeighborLoader(...)`` / ``HGTLoader(...)`` bound once, whose body compares the batch's
  labels ``batch.y`` whole (``==``, ``.eq``, or a metric or loss function given them: ``accuracy_score``,
  ``f1_score``, ``F.cross_entropy``) and never reads the batch's ``batch_size``, ``input_id``, ``n_id`` or a
  ``*_mask`` attribute (which select the seeds, or the evaluation nodes, of the subgraph);
- a loop over ``range(0, n, B)`` that cuts seeds ``s = idx[i:i + B]``, builds the subgraph's nodes as
  ``torch.cat([s, ...])`` (``np.concatenate``; inline, or in a function of the file called with ``s``),
  and compares labels indexed by those nodes (``y[nodes]``, bound once) whole with ``==``.

Labels cut to the seeds again (``y[:batch_size]``, a name bound twice) are silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit

_LOADERS = ("NeighborLoader", "HGTLoader")
_SEED_ATTRS = ("batch_size", "input_id", "n_id", "seed_node", "seed_nodes")
#: name words of a function that scores predictions against labels
_METRIC_WORDS = frozenset({"accuracy", "acc", "f1", "score", "auc", "roc", "precision", "recall", "mae", "mse",
                           "entropy", "nll", "metric", "correct"})


def _once(ix: FileIndex, name: str) -> ast.AST | None:
    made = ix.assigns.get(name, [])
    return made[0] if len(made) == 1 else None


def _loop_target(loop: ast.For) -> tuple[ast.AST, str | None]:
    it, target = loop.iter, loop.target
    while isinstance(it, ast.Call) and (dotted(it.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm") \
            and it.args:
        if (dotted(it.func) or "").endswith("enumerate") and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]
        it = it.args[0]
    return it, target.id if isinstance(target, ast.Name) else None


def _bare(node: ast.AST) -> ast.AST:
    """``node`` without ``.cpu()``, ``.numpy()``, ``.tolist()``, ``.detach()``, ``.long()``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args and \
            node.func.attr in ("cpu", "numpy", "tolist", "detach", "long", "float", "squeeze", "view_as"):
        node = node.func.value
    return node


def _compared_whole(loop: ast.For, is_labels) -> ast.AST | None:
    """The first ``==`` / ``.eq(...)`` in ``loop`` with one side the labels (``is_labels(side)``)."""
    for node in ast.walk(loop):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            if is_labels(node.left) or is_labels(node.comparators[0]):
                return node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "eq" \
                and node.args and (is_labels(node.func.value) or is_labels(node.args[0])):
            return node
        if isinstance(node, ast.Call) and set(tokens(dotted(node.func) or "")) & _METRIC_WORDS and \
                any(is_labels(a) for a in list(node.args) + [k.value for k in node.keywords]):
            return node  # accuracy_score(batch.y, pred), F.cross_entropy(out, batch.y), metric(out, y)
    return None


def _pyg_batches(ix: FileIndex, loop: ast.For) -> Iterator[Hit]:
    it, var = _loop_target(loop)
    loader = _once(ix, it.id) if isinstance(it, ast.Name) else it
    if var is None or not (isinstance(loader, ast.Call) and
                           (dotted(loader.func) or "").rsplit(".", 1)[-1] in _LOADERS):
        return
    for node in ast.walk(loop):
        if isinstance(node, ast.Attribute) and dotted(node.value) == var and \
                (node.attr in _SEED_ATTRS or node.attr.endswith("_mask") or node.attr.endswith("_index")
                 and node.attr != "edge_index"):
            return
    cmp = _compared_whole(loop, lambda side: dotted(_bare(side)) == f"{var}.y")
    if cmp is None:
        return
    name = (dotted(loader.func) or "").rsplit(".", 1)[-1]
    yield Hit("eval-samples-repeated", cmp,
              f"`{ix.segment(cmp)}` compares the predictions with `{var}.y` for every node of a batch of "
              f"{name} (line {loader.lineno}), but such a batch holds its seed nodes first and then the "
              "neighbours sampled for them: the metric also scores the sampled neighbours (nodes outside the "
              "evaluation set among them, and nodes again in every batch that samples them), so it counts more "
              "predictions than the "
              "evaluation set has nodes",
              fix=f"score the seeds only: `out[:{var}.batch_size]` against `{var}.y[:{var}.batch_size]`")


def _seed_slice(loop: ast.For) -> dict[str, ast.AST]:
    """Names bound in ``loop`` to ``idx[i:i + B]`` where ``i`` is the loop's ``range(0, n, B)`` variable."""
    if not (isinstance(loop.target, ast.Name) and isinstance(loop.iter, ast.Call) and dotted(loop.iter.func) == "range"
            and len(loop.iter.args) == 3):
        return {}
    i = loop.target.id
    out = {}
    for stmt in loop.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and \
                isinstance(stmt.value, ast.Subscript) and isinstance(stmt.value.slice, ast.Slice) and \
                isinstance(stmt.value.slice.lower, ast.Name) and stmt.value.slice.lower.id == i:
            out[stmt.targets[0].id] = stmt
    return out


def _cat_first(node: ast.AST, first: str) -> bool:
    """``node`` is ``torch.cat([first, ...])`` (``np.concatenate``, ``torch.concat``), ``first`` leading."""
    return isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in (
        "cat", "concat", "concatenate") and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)) and \
        len(node.args[0].elts) >= 2 and isinstance(node.args[0].elts[0], ast.Name) and \
        node.args[0].elts[0].id == first


def _returns_cat(ix: FileIndex, call: ast.Call, seeds: str) -> set[int]:
    """Positions of the returned tuple of a function of the file, called with ``seeds``, that are
    ``torch.cat([seeds, ...])``."""
    func = ix.callee(call)
    if func is None:
        return set()
    params = [a.arg for a in func.args.args]
    pos = [k for k, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == seeds]
    if len(pos) != 1 or pos[0] >= len(params):
        return set()
    param = params[pos[0]]
    bound = {}
    for n in ix.scope_nodes(func):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            bound.setdefault(n.targets[0].id, []).append(n.value)
    out: set[int] = set()
    for n in ix.scope_nodes(func):
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple):
            for k, e in enumerate(n.value.elts):
                if _cat_first(e, param) or (isinstance(e, ast.Name) and len(bound.get(e.id, [])) == 1
                                            and _cat_first(bound[e.id][0], param)):
                    out.add(k)
    return out


def _hand_batches(ix: FileIndex, loop: ast.For) -> Iterator[Hit]:
    seeds = _seed_slice(loop)
    if not seeds:
        return
    nodes: dict[str, ast.AST] = {}
    labels: dict[str, ast.AST] = {}
    counts: dict[str, int] = {}
    for n in ast.walk(loop):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Name):
                        counts[e.id] = counts.get(e.id, 0) + 1
    for stmt in loop.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        t, v = stmt.targets[0], stmt.value
        for s in seeds:
            if isinstance(t, ast.Name) and _cat_first(v, s):
                nodes[t.id] = stmt
            elif isinstance(t, ast.Tuple) and isinstance(v, ast.Call):
                for k in _returns_cat(ix, v, s):
                    if k < len(t.elts) and isinstance(t.elts[k], ast.Name):
                        nodes[t.elts[k].id] = stmt
    if not nodes:
        return
    for stmt in loop.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        t, v = stmt.targets[0], stmt.value
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and \
            len(t.elts) == len(v.elts) else [(t, v)]
        for tt, vv in pairs:
            if isinstance(tt, ast.Name) and counts.get(tt.id) == 1 and isinstance(vv, ast.Subscript) and \
                    isinstance(vv.value, ast.Name) and isinstance(vv.slice, ast.Name) and vv.slice.id in nodes:
                labels[tt.id] = vv
    cmp = _compared_whole(loop, lambda side: isinstance(side, ast.Name) and side.id in labels)
    if cmp is None:
        return
    lab = next(n.id for n in ast.walk(cmp) if isinstance(n, ast.Name) and n.id in labels)
    built = nodes[labels[lab].slice.id]  # type: ignore[attr-defined]
    seed = next(iter(seeds))
    yield Hit("eval-samples-repeated", cmp,
              f"`{ix.segment(cmp)}` scores `{lab}` (`{ix.segment(labels[lab])}`), the labels of every node of "
              f"the batch built at line {built.lineno}, whose nodes are the seeds `{seed}` (line "
              f"{seeds[seed].lineno}) followed by others: only the seeds are the batch's evaluation items, so "
              "the metric also scores the nodes added to them (nodes outside the evaluation set among them, and "
              "nodes again in every batch that adds them) and counts more predictions than the evaluation set has "
              "items",
              fix=f"score the first len({seed}) predictions and labels only (`out[:len({seed})]`, "
                  f"`{lab}[:len({seed})]`)")


def context_scored(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``eval-samples-repeated`` for seed batches scored with their sampled context."""
    for loop in ix.loops:
        if not isinstance(loop, ast.For) or not ix.under_no_grad(loop):
            continue
        yield from _pyg_batches(ix, loop)
        yield from _hand_batches(ix, loop)
