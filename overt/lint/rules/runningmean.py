"""A running mean that gives the newest value the count's weight (OVT215 ``running-mean-weights-newest``,
issue 33).

An invariant of every incremental mean -- stochastic weight averaging, a Polyak average of the weights, a
running loss or metric, cumulative statistics: after ``k`` values the mean folds in the next as
``(mean * k + new) / (k + 1)``.  The value stored back is the one that carries the count: it stands for the
``k`` values already averaged, the newcomer for one.  Written the other way round, ``mean <- (new * k + mean)
/ (k + 1)``, the old mean gets the weight ``1 / (k + 1)`` and the newcomer ``k / (k + 1)``: the weight kept on
the past falls as the run goes on, the "average" is nearly the last value, and nothing fails (an SWA update
written so, pbaylies/stylegan-encoder#13, w243: the averaged model is the final noisy iterate).

Proven from the code: a statement that stores into ``D`` (``D = ...``, ``D[i] = ...``, ``D.attr = ...``,
``D.copy_(...)``, ``D.data.copy_(...)``) the value ``(P * k + Q) / (k + 1)`` (the sum and the product in
either order, ``1 + k`` too, ``k`` not a number), where ``Q`` is ``D`` itself (``.data``/``.detach()``
aside) and ``P`` is not; inside a loop or a function (a mean is updated repeatedly).  Silent for the right
order, for ``mean + (new - mean) / (k + 1)``, for a weight that is a number (an EMA's own weight), and in
test files.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex
from overt.lint.rules.base import Hit, rule


def _plain(node: ast.AST) -> str:
    """``node``'s structure with ``.data``, ``.detach()`` and ``float()``/``int()`` wrappers taken off."""
    while True:
        if isinstance(node, ast.Attribute) and node.attr == "data":
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach" \
                and not node.args:
            node = node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("float", "int") \
                and len(node.args) == 1:
            node = node.args[0]
        else:
            return re.sub(r"(Load|Store|Del)\(\)", "", ast.dump(node, annotate_fields=False))  # read or written


def _plus_one(node: ast.AST) -> ast.AST | None:
    """``k`` when ``node`` is ``k + 1`` or ``1 + k`` (a float() around it allowed)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and \
            len(node.args) == 1:
        node = node.args[0]
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    for k, one in ((node.left, node.right), (node.right, node.left)):
        if isinstance(one, ast.Constant) and one.value in (1, 1.0) and not isinstance(k, ast.Constant):
            return k
    return None


def _update(value: ast.AST) -> tuple[ast.AST, ast.AST, ast.AST] | None:
    """(P, k, Q) when ``value`` is ``(P * k + Q) / (k + 1)`` in any of its written orders."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Div)):
        return None
    k = _plus_one(value.right)
    num = value.left
    if k is None or not (isinstance(num, ast.BinOp) and isinstance(num.op, ast.Add)):
        return None
    want = _plain(k)
    for prod, q in ((num.left, num.right), (num.right, num.left)):
        if isinstance(prod, ast.BinOp) and isinstance(prod.op, ast.Mult):
            for p, kk in ((prod.left, prod.right), (prod.right, prod.left)):
                if _plain(kk) == want:
                    return p, k, q
    return None


def _stores(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.AST, ast.AST]]:
    """(statement, destination, stored value) for assignments and ``copy_`` calls."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            yield node, node.targets[0], node.value
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "copy_" and len(call.args) == 1:
                yield node, call.func.value, call.args[0]


def _repeated(ix: FileIndex, node: ast.AST) -> bool:
    """Whether ``node`` runs inside a loop or a function."""
    parent = ix.parents.get(node)
    while parent is not None:
        if isinstance(parent, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
        parent = ix.parents.get(parent)
    return False


@rule("running-mean-weights-newest")
def running_mean_weights_newest(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file:
        return
    for stmt, dest, value in _stores(ix):
        found = _update(value)
        if found is None:
            continue
        p, k, q = found
        d = _plain(dest)
        if _plain(q) != d or _plain(p) == d or not _repeated(ix, stmt):
            continue
        mean, new, count = ix.segment(q), ix.segment(p), ix.segment(k)
        yield Hit("running-mean-weights-newest", stmt,
                  f"`{ix.segment(stmt)}` folds `{new}` into the running mean `{mean}` with the count `{count}` on "
                  f"the newcomer and weight 1 on `{mean}`, which stands for the {count} values already averaged: "
                  f"the mean keeps 1/({count} + 1) of its past and gives the newest value the rest, so it is "
                  "nearly the last value (an SWA or Polyak average that is the final noisy iterate, a running loss "
                  "that is the last batch's) while nothing fails",
                  fix=f"weight the stored mean by the count: `({mean} * {count} + {new}) / ({count} + 1)` (or "
                      f"`{mean} + ({new} - {mean}) / ({count} + 1)`; torch.optim.swa_utils.AveragedModel does it)")
