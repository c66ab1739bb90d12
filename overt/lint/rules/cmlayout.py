"""Confusion counts read from the wrong cells of a binary confusion matrix (part of OVT824
``metric-off-definition``; issue 33, session 55).

Premise: scikit-learn's ``confusion_matrix(y_true, y_pred)`` puts the true labels on the rows and the
predictions on the columns, both in sorted label order, so for labels 0/1 (or False/True) the matrix is
``[[TN, FP], [FN, TP]]``; torchmetrics' ``binary_confusion_matrix`` has the same layout.  A count named a true
positive must come from cell ``[1, 1]`` and a true negative from ``[0, 0]``; read as ``[[TP, FN], [FP, TN]]``
(pykeen/pykeen#1590), every metric built from the counts scores the negative class, which on imbalanced data
reads far better than the model, and nothing fails.

The rule proves each part from the code: the matrix is bound once in its scope from one of those calls (or
unpacked straight from its ``.ravel()``); the positive label is the one sorted last, proven by ``labels=[0, 1]``
(or ``[False, True]``), by a ``binary_confusion_matrix`` call, or by one of the call's two label arguments being a
comparison (``score > 0``, ``y == 8``: True is the class the comparison detects); a name that ``countformula``
reads as one confusion count (``tp``, ``true_negatives`` ...) is bound from a cell given by constant indices
(``m[0, 0]``, ``m[0][0]``, the n-th item of ``m.ravel()``).  Only the diagonal is judged (a true positive or
negative off its cell): which off-diagonal cell holds the false positives also depends on the order of the
call's arguments (``metric-arguments-swapped`` judges that).  Anything else -- ``labels=`` another list, string
labels, no comparison to prove the positive label, a matrix bound twice -- leaves it silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, has_star_kwargs, kwarg
from overt.lint.rules.base import Hit
from overt.lint.rules.countformula import count_kind
from overt.lint.rules.metricargs import _bound, _strip

#: where each count is in the binary layout [[TN, FP], [FN, TP]]
CELLS: dict[str, tuple[int, int]] = {"tn": (0, 0), "fp": (0, 1), "fn": (1, 0), "tp": (1, 1)}
_NAMES = {"tp": "true positives", "tn": "true negatives", "fp": "false positives", "fn": "false negatives"}
#: methods that flatten a 2x2 matrix row by row (or only convert it)
_FLAT = frozenset({"ravel", "flatten", "tolist", "numpy", "cpu", "detach", "reshape", "view"})
#: methods and functions that take one cell's value unchanged
_SCALAR = frozenset({"item", "int", "float", "tolist"})


def _matrix_call(ix: FileIndex, node: ast.AST) -> tuple[ast.Call, str] | None:
    """(the call, its name) when ``node`` is a binary confusion matrix call whose positive label is proven last."""
    if not isinstance(node, ast.Call) or has_star_kwargs(node) or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    q = ix.qualname(node.func) or ""
    last = q.rsplit(".", 1)[-1]
    if last == "binary_confusion_matrix" and q.startswith("torchmetrics"):
        return node, q  # thresholded internally: the positive class is 1 and sorts last
    if last != "confusion_matrix" or not q.startswith("sklearn.metrics"):
        return None
    labels = kwarg(node, "labels")
    if len(node.args) > 2:
        labels = node.args[2]
    if labels is not None:
        if isinstance(labels, (ast.List, ast.Tuple)) and len(labels.elts) == 2 and \
                [getattr(e, "value", None) for e in labels.elts] in ([0, 1], [False, True]) and \
                all(isinstance(e, ast.Constant) for e in labels.elts):
            return node, q
        return None
    sides = [kwarg(node, "y_true"), kwarg(node, "y_pred")] + list(node.args[:2])
    if any(_compared(ix, s) for s in sides if s is not None):
        return node, q
    return None


def _compared(ix: FileIndex, node: ast.AST) -> bool:
    """Whether ``node`` is (one hop through a name bound once) a single comparison, cast or converted."""
    node = _strip(node)
    if isinstance(node, ast.Subscript):
        node = _strip(node.value)  # a slice of the labels: the same values
    if isinstance(node, ast.Name):
        value = _bound(ix, node)
        if value is None:
            return False
        node = _strip(value)
        if isinstance(node, ast.Subscript):
            node = _strip(node.value)
    membership = (ast.In, ast.NotIn, ast.Is, ast.IsNot)
    return isinstance(node, ast.Compare) and len(node.ops) == 1 and not isinstance(node.ops[0], membership)


def _index(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value in (0, 1):
        return node.value
    return None


def _cell(node: ast.AST, matrix: str) -> tuple[int, int] | None:
    """The (row, column) of ``matrix`` that ``node`` reads: ``m[i, j]``, ``m[i][j]``, maybe ``.item()``'d."""
    while isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _SCALAR:
        node = node.func.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float") and \
            len(node.args) == 1:
        node = node.args[0]
    if not isinstance(node, ast.Subscript):
        return None
    if isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2 and dotted(node.value) == matrix:
        i, j = (_index(e) for e in node.slice.elts)
        return (i, j) if i is not None and j is not None else None
    inner = node.value
    if isinstance(inner, ast.Subscript) and dotted(inner.value) == matrix:
        i, j = _index(inner.slice), _index(node.slice)
        return (i, j) if i is not None and j is not None else None
    return None


def _flattened(node: ast.AST, matrix: str | None) -> bool:
    """Whether ``node`` is the matrix flattened row by row (``m.ravel()``, ``m.flatten().tolist()``)."""
    flat = False
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FLAT:
        if node.func.attr in ("reshape", "view"):
            if len(node.args) != 1 or not (isinstance(node.args[0], ast.UnaryOp) and _index(node.args[0].operand)
                                           == 1):
                return False
            flat = True
        elif node.func.attr in ("ravel", "flatten"):
            flat = True
        node = node.func.value
    return flat and (matrix is None and isinstance(node, ast.Call) or matrix is not None and dotted(node) == matrix)


def _reads(target: ast.AST, value: ast.AST, matrix: str | None) -> list[tuple[str, str, tuple[int, int]]]:
    """(name, count kind, cell) of each confusion count the assignment binds from the matrix's cells."""
    out: list[tuple[str, str, tuple[int, int]]] = []
    if isinstance(target, ast.Tuple) and _flattened(value, matrix) and len(target.elts) == 4:
        for k, elt in enumerate(target.elts):
            name = dotted(elt)
            kind = count_kind(name) if name else None
            if kind:
                out.append((name or "", kind, divmod(k, 2)))
        return out
    if matrix is None:
        return out
    pairs: list[tuple[ast.AST, ast.AST]] = []
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        pairs = list(zip(target.elts, value.elts))
    elif not isinstance(target, ast.Tuple):
        pairs = [(target, value)]
    for t, v in pairs:
        name = dotted(t)
        kind = count_kind(name) if name else None
        cell = _cell(v, matrix) if kind else None
        if kind and cell:
            out.append((name or "", kind, cell))
    return out


def misread_cells(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for true positives or negatives read off the diagonal cell they are in."""
    for call in ix.calls:
        found = _matrix_call(ix, call)
        if found is None:
            continue
        parent = ix.parents.get(call)
        assign = parent if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
        matrix: str | None = None
        sites: list[ast.Assign] = []
        if assign is not None and isinstance(assign.targets[0], ast.Name) and assign.value is call:
            matrix = assign.targets[0].id
            scope = ix.enclosing_function(call) or ix.tree
            nodes = ix.scope_nodes(scope)
            binds = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
                     and any(isinstance(t, ast.Name) and t.id == matrix for t in
                             ast.walk(n.target if not isinstance(n, ast.Assign) else ast.Tuple(elts=n.targets)))]
            if len(binds) != 1:
                continue  # a matrix bound twice: which one a cell read sees is not proven
            sites = [n for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1 and n is not assign]
        else:
            outer = call
            while isinstance(ix.parents.get(outer), (ast.Attribute, ast.Call)) and not isinstance(outer, ast.Assign):
                outer = ix.parents[outer]
            if isinstance(outer, ast.Assign) and len(outer.targets) == 1:
                sites = [outer]
        for site in sites:
            reads = _reads(site.targets[0], site.value, matrix)
            wrong = [(n, k, c) for n, k, c in reads if k in ("tp", "tn") and c != CELLS[k]]
            if not wrong:
                continue
            name, kind, cell = wrong[0]
            holds = next(k for k, c in CELLS.items() if c == cell)
            yield Hit("metric-off-definition", site,
                      f"`{name}` is read as the {_NAMES[kind]} from cell [{cell[0]}, {cell[1]}] of the confusion "
                      f"matrix of `{ix.segment(call)}` (line {call.lineno}), but that call's binary matrix is "
                      f"[[TN, FP], [FN, TP]] (rows the true labels, columns the predictions, the positive label "
                      f"sorted last): [{cell[0]}, {cell[1]}] holds the {_NAMES[holds]}, so every metric built from "
                      "these counts is the other class's, and on imbalanced data it reads far better than the "
                      "model",
                      fix="unpack the counts in the library's order, `tn, fp, fn, tp = matrix.ravel()` (true "
                          "positives at [1, 1], true negatives at [0, 0]), or pass `labels=[0, 1]` and read them so")
