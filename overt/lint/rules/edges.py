"""Undirected edges kept in one direction for message passing (OVT418 ``edges-one-direction``, issue 33).

Message passing follows ``edge_index`` from source to target: an undirected graph must list every
edge both ways, or each node hears only the neighbours on one side of the order and half of the
graph's messages are never sent (c2g-dev/city2graph#157: "message passing only saw half of the
expected edges"; pytorch_geometric#435: "The `edge_index` needs to contain a pair going both ways").

Whether a graph is undirected is a fact of the data, so the rule fires only where the code itself
shows it: the edges come from a symmetric relation (``f[i] == f[j]`` of the two endpoints, or a
symmetric matrix ``A @ A.T``/``cdist(A, A)`` and comparisons of one) and are then cut to one
orientation of each pair (``P[:, 0] < P[:, 1]`` as a mask of ``P``, or ``triu(S).nonzero()``); the
result, under a name that says edges, is passed to a call that does not score pairs (not a
decoder, loss or metric) or as ``edge_index=``, bound once and never symmetrised in the file
(no ``to_undirected``, ``flip``, ``[[1, 0]]`` or ``[1, 0]`` of it, no second binding).  A ``u < v``
filter alone (how random DAGs are made acyclic) stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule

_KEEP = frozenset({"t", "contiguous", "long", "to", "cpu", "cuda", "int"})


def _strip(node: ast.AST) -> ast.AST:
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP:
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr == "T":
            node = node.value
        else:
            return node


def _bound_once(ix: FileIndex, name: ast.Name) -> ast.AST | None:
    values = ix.assigns.get(name.id, [])
    return values[0] if len(values) == 1 else None


def _column(node: ast.AST) -> tuple[str, int] | None:
    """(P, k) for ``P[:, k]`` / ``P[k]`` with k 0 or 1."""
    if not isinstance(node, ast.Subscript):
        return None
    sl = node.slice
    last = sl.elts[-1] if isinstance(sl, ast.Tuple) and sl.elts else sl
    name = dotted(node.value)
    if name and isinstance(last, ast.Constant) and last.value in (0, 1):
        return name, last.value
    return None


def _conjuncts(ix: FileIndex, node: ast.AST, depth: int = 0) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        return _conjuncts(ix, node.left, depth) + _conjuncts(ix, node.right, depth)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in _conjuncts(ix, v, depth)]
    if isinstance(node, ast.Name) and depth < 2:
        value = _bound_once(ix, node)
        if value is not None:
            return _conjuncts(ix, value, depth + 1)
    return [node]


def _orders_pair(node: ast.AST, pairs: str) -> bool:
    """``P[:, 0] < P[:, 1]`` (either order, strict)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Lt, ast.Gt))):
        return False
    a, b = _column(node.left), _column(node.comparators[0])
    return bool(a and b and a[0] == b[0] == pairs and {a[1], b[1]} == {0, 1})


def _symmetric_relation(node: ast.AST, pairs: str) -> bool:
    """``f[P[:, 0]] == f[P[:, 1]]``: a relation that holds for (i, j) exactly when it holds for (j, i)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
        return False
    left, right = node.left, node.comparators[0]
    if not (isinstance(left, ast.Subscript) and isinstance(right, ast.Subscript)):
        return False
    if dotted(left.value) is None or dotted(left.value) != dotted(right.value):
        return False
    a, b = _column(left.slice), _column(right.slice)
    return bool(a and b and a[0] == b[0] == pairs and {a[1], b[1]} == {0, 1})


def _filtered_pairs(ix: FileIndex, node: ast.AST) -> str | None:
    """Why ``node`` (``P[mask]``) keeps one orientation of each pair of a symmetric relation."""
    if not isinstance(node, ast.Subscript):
        return None
    pairs = dotted(node.value)
    if pairs is None:
        return None
    terms = _conjuncts(ix, node.slice)
    if any(_orders_pair(t, pairs) for t in terms) and any(_symmetric_relation(t, pairs) for t in terms):
        return f"pairs of a symmetric relation cut to one orientation by `{pairs}[:, 0] < {pairs}[:, 1]`"
    return None


def _symmetric_matrix(ix: FileIndex, node: ast.AST, depth: int = 0) -> bool:
    if isinstance(node, ast.Name) and depth < 2:
        value = _bound_once(ix, node)
        return value is not None and _symmetric_matrix(ix, value, depth + 1)
    if isinstance(node, ast.Compare) and len(node.comparators) == 1 and isinstance(node.comparators[0], ast.Constant):
        return _symmetric_matrix(ix, node.left, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        right = node.right
        base = right.value if isinstance(right, ast.Attribute) and right.attr in ("T", "mT") else (
            right.func.value if isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute)
            and right.func.attr == "t" else None)
        return base is not None and dotted(base) is not None and dotted(base) == dotted(node.left)
    if isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "cdist" and len(node.args) == 2:
        return dotted(node.args[0]) is not None and dotted(node.args[0]) == dotted(node.args[1])
    return False


def _upper_triangle(ix: FileIndex, node: ast.AST) -> str | None:
    """``triu(S).nonzero()`` of a symmetric ``S``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "nonzero"):
        return None
    inner = node.func.value
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "triu":
        matrix = inner.func.value if dotted(inner.func.value) not in ("torch", "np", "numpy") else (
            inner.args[0] if inner.args else None)
        if matrix is not None and _symmetric_matrix(ix, matrix):
            return f"the upper triangle of the symmetric matrix `{ast.unparse(matrix)}`"
    return None


def _one_way_source(ix: FileIndex, value: ast.AST, line: int) -> str | None:
    value = _strip(value)
    how = _filtered_pairs(ix, value) or _upper_triangle(ix, value)
    if how or not isinstance(value, ast.Name):
        return how
    scope_assigns = [n for n in ast.walk(ix.tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id == value.id and n.lineno < line]
    if not scope_assigns:
        return None
    last = max(scope_assigns, key=lambda n: n.lineno)
    inner = _strip(last.value)
    return _filtered_pairs(ix, inner) or _upper_triangle(ix, inner)


def _symmetrised(ix: FileIndex, name: str) -> bool:
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Call):
            callee = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if callee in ("to_undirected", "is_undirected", "to_symmetric"):
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("flip", "fliplr", "flipud") and \
                    dotted(node.func.value) == name:
                return True
            if callee in ("flip", "fliplr", "flipud") and node.args and dotted(node.args[0]) == name:
                return True
        if isinstance(node, ast.Subscript) and dotted(node.value) == name:
            text = ast.unparse(node.slice)
            if text.replace(" ", "") in ("[1,0]", "(1,0)", "[[1,0]]", "[[1,0],:]", "[1,0],:", "::-1"):
                return True
    return False


def _scores(call: ast.Call) -> bool:
    """A call that scores pairs (a link decoder, a loss), where one orientation per pair is right."""
    name = dotted(call.func) or ""
    return bool(set(tokens(name)) & {"decode", "decoder", "score", "scores", "loss", "link", "predict", "metric"})


@rule("edges-one-direction")
def edges_one_direction(ix: FileIndex) -> Iterator[Hit]:
    """``edge_index = pairs[same & (pairs[:, 0] < pairs[:, 1])].t()`` given to message passing
    (issue 33, c2g-dev/city2graph#157)."""
    for name, values in ix.assigns.items():
        if len(values) != 1 or "." in name:
            continue
        value = values[0]
        assign = ix.parents.get(value)
        if not isinstance(assign, ast.Assign):
            continue
        how = _one_way_source(ix, value, assign.lineno)
        if how is None or _symmetrised(ix, name):
            continue
        scope = ix.enclosing_function(assign)
        edge_named = bool({"edge", "edges"} & set(tokens(name)))
        uses = [c for c in ix.calls if ix.enclosing_function(c) is scope and not _scores(c) and (
                edge_named and any(isinstance(a, ast.Name) and a.id == name for a in c.args[1:])
                or any(k.arg == "edge_index" and isinstance(k.value, ast.Name) and k.value.id == name
                       for k in c.keywords))]
        if not uses:
            continue
        use = uses[0]
        yield Hit("edges-one-direction", assign,
                  f"`{name}` lists each undirected edge once ({how}) and is passed as is to "
                  f"`{ast.unparse(use.func)}(...)` (line {use.lineno}): message passing follows edges from "
                  f"source to target, so each node hears only the neighbours on one side of the order and half of "
                  f"the graph's messages are never sent",
                  fix=f"add the reverse of every edge before message passing: {name} = torch.cat([{name}, "
                      f"{name}.flip(0)], dim=1) (or torch_geometric.utils.to_undirected({name}))")
