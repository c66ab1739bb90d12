"""A ranking metric's relevant set built from evaluation rows whose label the code reads elsewhere (part of OVT824
``metric-off-definition``).

Precision@k, recall@k, the hit rate and NDCG count a recommended item as a hit when it is relevant: an item the
user interacted with positively.  Evaluation rows of implicit or explicit feedback carry a label column (clicked
or not, liked or rejected); a relevant set built from every row of the user counts the items the user was shown
and turned down as hits, and the metric credits the model for recommending them
(massquantity/LibRecommender#364).

Proven from the code: ``S = set(A[:, c] ...)`` (through ``.long()``, ``.tolist()``, ``.numpy()``, ``.cpu()``)
takes column ``c`` of every row of ``A``, the same scope compares another column ``d`` of the same ``A`` with a
label value (``A[:, d] == 1``, ``> 0``, ``!= 0``: the code itself reads ``d`` as the rows' label), and ``S`` is
the collection a top-k is tested against (``t in S`` over a ``topk``/``argsort``/``argpartition``/``nlargest``
result).  Silent when the rows are filtered before the set is built (``A[A[:, d] == 1][:, c]``), when no column
of ``A`` is read as a label, or when the set is not tested against a top-k.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit

_KEEP = frozenset({"long", "int", "tolist", "numpy", "cpu", "detach", "flatten", "ravel", "unique", "squeeze"})
_TOPK = frozenset({"topk", "argsort", "argpartition", "nlargest", "argmax"})


def _strip(node: ast.AST) -> ast.AST:
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP:
            node = node.func.value
        elif isinstance(node, ast.Call) and dotted(node.func) in ("list", "np.unique", "torch.unique") \
                and len(node.args) == 1:
            node = node.args[0]
        else:
            return node


def _column(node: ast.AST) -> tuple[str, int] | None:
    """(A, c) of ``A[:, c]`` with ``A`` a plain name and ``c`` an integer constant."""
    node = _strip(node)
    if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
        return None
    sl = node.slice
    if isinstance(sl, ast.Tuple) and len(sl.elts) == 2 and isinstance(sl.elts[0], ast.Slice) \
            and sl.elts[0].lower is None and sl.elts[0].upper is None and sl.elts[0].step is None \
            and isinstance(sl.elts[1], ast.Constant) and isinstance(sl.elts[1].value, int) \
            and not isinstance(sl.elts[1].value, bool):
        return node.value.id, sl.elts[1].value
    return None


def _label_test(node: ast.AST) -> tuple[str, int] | None:
    """(A, d) of ``A[:, d] == 1`` / ``> 0`` / ``!= 0`` / ``>= 1`` (under ``.any()``, ``.all()`` or not)."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1 or len(node.comparators) != 1:
        return None
    right = node.comparators[0]
    if not isinstance(right, ast.Constant) or isinstance(right.value, bool) \
            or not isinstance(right.value, (int, float)):
        return None
    op, v = node.ops[0], right.value
    if not ((isinstance(op, ast.Eq) and v == 1) or (isinstance(op, ast.Gt) and v == 0)
            or (isinstance(op, ast.NotEq) and v == 0) or (isinstance(op, ast.GtE) and v == 1)):
        return None
    return _column(node.left)


def _topk_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound in the scope to a top-k of scores (``x.topk(k).indices``, ``np.argsort(-s)[:k]`` ...)."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Call):
                    name = sub.func.attr if isinstance(sub.func, ast.Attribute) else dotted(sub.func) or ""
                    if name in _TOPK:
                        out.add(node.targets[0].id)
                        break
    return out


def _tested_against_topk(nodes: list[ast.AST], name: str, tops: set[str]) -> ast.AST | None:
    """The first ``t in name`` whose ``t`` runs over a top-k."""
    for node in nodes:
        if not isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            continue
        gen = node.generators[0]
        if not isinstance(gen.target, ast.Name):
            continue
        it = gen.iter
        while isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _KEEP:
            it = it.func.value
        if isinstance(it, ast.Subscript):
            it = it.value
        if not (isinstance(it, ast.Name) and it.id in tops):
            continue
        for sub in ast.walk(node.elt):
            if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.ops[0], ast.In) \
                    and isinstance(sub.left, ast.Name) and sub.left.id == gen.target.id \
                    and isinstance(sub.comparators[0], ast.Name) and sub.comparators[0].id == name:
                return sub
    return None


def relevant_rows_unlabelled(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for a relevant set holding every evaluation row, negatives included."""
    scopes: list[ast.AST] = [ix.tree] + [n for n in ast.walk(ix.tree)
                                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        nodes = ix.scope_nodes(scope)
        labels: dict[str, list[tuple[int, ast.AST]]] = {}
        for node in nodes:
            hit = _label_test(node)
            if hit:
                labels.setdefault(hit[0], []).append((hit[1], node))
        if not labels:
            continue
        tops = _topk_names(nodes)
        if not tops:
            continue
        for node in nodes:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call) and dotted(node.value.func) in ("set", "frozenset")
                    and len(node.value.args) == 1):
                continue
            col = _column(node.value.args[0])
            if col is None or col[0] not in labels:
                continue
            other = [(d, test) for d, test in labels[col[0]] if d != col[1]]
            if not other:
                continue
            name = node.targets[0].id
            used = _tested_against_topk(nodes, name, tops)
            if used is None:
                continue
            d, test = other[0]
            yield Hit("metric-off-definition", node.value,
                      f"`{name}` is the relevant set a top-k is scored against (line {used.lineno}: "
                      f"`{ix.segment(used)}`), but it takes column {col[1]} of every row of `{col[0]}`, while line "
                      f"{test.lineno} reads column {d} of the same rows as their label (`{ix.segment(test)}`): the items "
                      "of negative rows (shown and rejected) count as hits, so precision@k, recall@k or the hit rate "
                      "credits the model for recommending what users turned down",
                      fix=f"build the set from the positive rows only: set({col[0]}[{col[0]}[:, {d}] == 1][:, "
                          f"{col[1]}].tolist())")
