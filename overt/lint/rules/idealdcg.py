"""An NDCG whose ideal DCG is the retrieved list re-sorted (part of OVT824 ``metric-off-definition``).

NDCG@k divides the DCG of the ranked list by the DCG of the ideal ranking of *all* the query's relevant
items.  Computed instead from the relevances of the k items the model retrieved, sorted
(``dcg_at_k(sorted(r, reverse=True), k)`` with ``r = rel[top_k]``), the ideal only holds what was found: a
list with one relevant item at rank 1 scores a perfect 1.0 however many relevant items it missed, and the
reported NDCG is inflated (xiangwang1223/neural_graph_collaborative_filtering#34).

Proven from the code: one function named for a DCG (``dcg``, ``dcg_at_k``, ``DCG`` ...) is called on a list
``r`` and on ``r`` sorted in descending order (``sorted(r, reverse=True)``, ``np.sort(r)[::-1]``,
``torch.sort(r, descending=True)``, ``r.sort(descending=True)``); and ``r`` is the relevance of a top-k cut of
a ranking: indexed by (or a comprehension over) a name bound to ``argsort(...)[:k]``, a ``topk``'s
indices, ``np.argpartition``, ``heapq.nlargest``, or a ranking cut by ``[:k]``.  A list that is not a cut
(relevances of every candidate) is silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg, names_in, tokens
from overt.lint.rules.base import Hit


def _dcg_name(func: ast.AST) -> str | None:
    name = dotted(func)
    if not name:
        return None
    words = tokens(name)
    return name if "dcg" in words and "ndcg" not in words and "idcg" not in words else None


def _sorted_desc(node: ast.AST) -> ast.AST | None:
    """The list ``node`` sorts in descending order, or None."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None \
            and node.slice.upper is None and isinstance(node.slice.step, ast.UnaryOp) \
            and isinstance(node.slice.step.op, ast.USub):  # np.sort(r)[::-1], sorted(r)[::-1]
        inner = node.value
        if isinstance(inner, ast.Call) and (dotted(inner.func) in ("sorted", "np.sort", "numpy.sort")) and inner.args:
            return inner.args[0]
        return None
    if isinstance(node, ast.Attribute) and node.attr == "values":
        node = node.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 0:
        node = node.value
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func) or ""
    if name == "sorted" and node.args and is_const(kwarg(node, "reverse"), True):
        return node.args[0]
    if name == "torch.sort" and node.args and is_const(kwarg(node, "descending"), True):
        return node.args[0]
    if isinstance(node.func, ast.Attribute) and node.func.attr == "sort" and name != "torch.sort" \
            and is_const(kwarg(node, "descending"), True):
        return node.func.value
    return None


def _bound_once(ix: FileIndex, scope: ast.AST | None, name: str) -> ast.AST | None:
    values = []
    for node in ix.scope_nodes(scope if scope is not None else ix.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    values.append(node.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and name in names_in(t):
                    values.append(node.value if isinstance(node.value, ast.Call) else None)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) and name in names_in(node.target):
            values.append(None)
    return values[0] if len(values) == 1 else None


def _is_cut(ix: FileIndex, node: ast.AST, scope: ast.AST | None, depth: int = 0) -> bool:
    """``node`` (an expression, or a name bound once) is a top-k cut of a ranking."""
    if depth > 3:
        return False
    if isinstance(node, ast.Name):
        value = _bound_once(ix, scope, node.id)
        return value is not None and _is_cut(ix, value, scope, depth + 1)
    if isinstance(node, ast.Attribute) and node.attr == "indices":
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("tolist", "numpy", "cpu"):
        return _is_cut(ix, node.func.value, scope, depth)
    if isinstance(node, ast.Subscript):
        sl = node.slice
        if isinstance(sl, ast.Constant) and sl.value == 1 and isinstance(node.value, ast.Call):
            return _topk(node.value)
        if isinstance(sl, ast.Name):  # a row of a cut matrix: top[u]
            return _is_cut(ix, node.value, scope, depth + 1)
        cut = sl.elts[-1] if isinstance(sl, ast.Tuple) and sl.elts else sl
        if isinstance(cut, ast.Slice) and cut.lower is None and cut.upper is not None and cut.step is None:
            return _ranked(node.value)
        return False
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        return _topk(node) or name in ("heapq.nlargest", "nlargest")
    return False


def _topk(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "topk"


def _ranked(node: ast.AST) -> bool:
    """``node`` orders candidates by score: an argsort, an argpartition, a ranking reversed."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr in ("argsort", "argpartition")


def _retrieved(ix: FileIndex, r: ast.AST, scope: ast.AST | None) -> ast.AST | None:
    """The binding of ``r`` when it is the relevance of a top-k cut (indexed by it, or a comprehension over
    it), else None."""
    if not isinstance(r, ast.Name):
        return None
    value = _bound_once(ix, scope, r.id)
    if value is None:
        return None
    core = value
    while isinstance(core, ast.Call):
        if isinstance(core.func, ast.Attribute) and core.func.attr in ("astype", "float", "tolist", "numpy", "cpu",
                                                                       "int", "long"):
            core = core.func.value
        elif dotted(core.func) in ("list", "np.array", "np.asarray", "numpy.array", "numpy.asarray") and core.args:
            core = core.args[0]
        else:
            break
    if isinstance(core, (ast.ListComp, ast.GeneratorExp)) and len(core.generators) == 1:
        return value if _is_cut(ix, core.generators[0].iter, scope) else None
    if isinstance(core, ast.List) and not core.elts:  # r = []; for i in top: r.append(int(i in relevant))
        loops = [n for n in ix.scope_nodes(scope if scope is not None else ix.tree) if isinstance(n, ast.For)
                 and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "append"
                         and dotted(c.func.value) == r.id for b in n.body for c in ast.walk(b))]
        if len(loops) == 1 and _is_cut(ix, loops[0].iter, scope):
            return loops[0].iter
    if isinstance(core, ast.Subscript):
        parts = core.slice.elts if isinstance(core.slice, ast.Tuple) else [core.slice]
        if any(_is_cut(ix, p, scope) for p in parts if not isinstance(p, ast.Slice)):
            return value
    return None


def _passed_retrieved(ix: FileIndex, func: ast.AST, param: str) -> tuple[ast.AST | None, str]:
    """(the binding, a note) when ``param`` of ``func`` is not bound again there and a call of ``func`` in this
    file passes it the relevance of a top-k cut."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None, ""
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if param not in params or _bound_once(ix, func, param) is not None or any(
            isinstance(n, (ast.Assign, ast.AugAssign, ast.For)) and param in names_in(
                n.targets[0] if isinstance(n, ast.Assign) else n.target) for n in ix.scope_nodes(func)):
        return None, ""
    index = params.index(param) - (1 if params and params[0] in ("self", "cls") else 0)
    for site in ix.call_sites(func):
        arg = kwarg(site, param)
        if arg is None and 0 <= index < len(site.args):
            arg = site.args[index]
        if isinstance(arg, ast.Name):
            found = _retrieved(ix, arg, ix.enclosing_function(site))
            if found is not None:
                return found, f", passed as `{param}` by the call at line {site.lineno}"
    return None, ""


def ideal_from_retrieved(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for an NDCG whose ideal DCG is built from the retrieved list."""
    for call in ix.calls:
        name = _dcg_name(call.func)
        if name is None or not call.args:
            continue
        listed = _sorted_desc(call.args[0])
        if not isinstance(listed, ast.Name):
            continue
        scope = ix.enclosing_function(call)
        if not any(isinstance(other, ast.Call) and other is not call and dotted(other.func) == name and other.args
                   and isinstance(other.args[0], ast.Name) and other.args[0].id == listed.id
                   for other in (ix.scope_nodes(scope if scope is not None else ix.tree))):
            continue
        binding, via = _retrieved(ix, listed, scope), ""
        if binding is None and scope is not None:
            binding, via = _passed_retrieved(ix, scope, listed.id)
        if binding is None:
            continue
        r = listed.id
        yield Hit("metric-off-definition", call,
                  f"`{ix.segment(call)}` is the ideal DCG, computed from `{r}` re-sorted, and `{r}` holds the "
                  f"relevance of the top-k items the model retrieved{via} (`{ix.segment(binding)}`, line "
                  f"{binding.lineno}): NDCG's ideal ranks every relevant item of the query, so a list with one "
                  "relevant item at rank 1 scores a perfect 1.0 however many relevant items it missed, and the NDCG "
                  "reported is inflated (with one relevant item per query the two agree)",
                  fix=f"compute the ideal DCG from all of the query's relevant items: {name}([1] * "
                      "min(n_relevant, k), k) for binary relevance, or the query's true relevances sorted in "
                      "descending order, cut to k (sklearn.metrics.ndcg_score does this)")
