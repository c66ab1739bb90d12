"""An array's shape unpacked as ``width, height`` while the array is indexed rows by y (one form of OVT546
``coordinates-scaled-by-other-axis``, whose rule is :mod:`overt.lint.rules.axisscale`; issue 33, branch features19,
w410).

An image, heatmap or mask indexed ``A[y..., x...]`` has its height first in its shape: ``A.shape`` is ``(H, W)``
(``A.shape[:2]`` of ``(H, W, C)``, ``A.shape[-2:]`` of ``(..., H, W)``).  Unpacked as ``width, height = A.shape``,
the name ``width`` holds the height: every x bounded, clipped or scaled with it uses the other axis, so on a
non-square array points right of the height's column are truncated or dropped (pprp/SimpleCVReproduction#13: a
CenterNet Gaussian drawn against the swapped bounds) -- and nothing fails.

Proven from the code, in one function: ``w, h = A.shape`` (``A.shape[:2]``, ``A.shape[0:2]``, ``A.shape[-2:]``,
``A.size()``; a third name for channels allowed after them) where ``w`` names a width and ``h`` a height, ``A`` is
subscripted ``A[i, j]`` (the two axes the names came from) with ``i`` made of y names only (``y``, ``cy``, ``top``,
``bottom``, ``y0`` ...) and ``j`` of x names only, and ``w`` meets an x name in one expression (``width - x``,
``min(x, w)``): the width that bounds x is the height.

Silent: arrays indexed ``A[x, y]`` (a grid stored x first), arrays never indexed by coordinates here, ``h, w``
unpacking, PIL's ``img.size`` (which is ``(W, H)``), names that say neither width nor height.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from overt.lint.index import FileIndex, dotted

_X = re.compile(r"^(?:x|x[0-9]|x_?min|x_?max|cx|xc|x_c|left|right|x_?left|x_?right|col|u)$", re.I)
_Y = re.compile(r"^(?:y|y[0-9]|y_?min|y_?max|cy|yc|y_c|top|bottom|y_?top|y_?bottom|row|v)$", re.I)


def _axes(value: ast.AST) -> tuple[str, tuple[int, int]] | None:
    """(array, the two axes of the array the first two names come from) for ``A.shape``-like values."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size" \
            and not value.args and not value.keywords:
        holder = dotted(value.func.value)
        return (holder, (0, 1)) if holder else None
    if isinstance(value, ast.Attribute) and value.attr == "shape":
        holder = dotted(value.value)
        return (holder, (0, 1)) if holder else None
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) and value.value.attr == "shape" \
            and isinstance(value.slice, ast.Slice) and value.slice.step is None:
        holder = dotted(value.value.value)
        lo, hi = value.slice.lower, value.slice.upper
        if holder is None:
            return None
        if (lo is None or (isinstance(lo, ast.Constant) and lo.value == 0)) \
                and isinstance(hi, ast.Constant) and hi.value in (2, 3):
            return holder, (0, 1)
        if hi is None and isinstance(lo, ast.UnaryOp) and isinstance(lo.op, ast.USub) \
                and isinstance(lo.operand, ast.Constant) and lo.operand.value == 2:
            return holder, (-2, -1)
    return None


def _names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


def _only(node: ast.AST, pattern: re.Pattern, other: re.Pattern) -> bool:
    """Whether ``node`` mentions a name of ``pattern`` and none of ``other``."""
    names = _names(node)
    return any(pattern.match(n) for n in names) and not any(other.match(n) for n in names)


def _indexed_y_first(nodes: list[ast.AST], array: str, axes: tuple[int, int]) -> ast.Subscript | None:
    """A subscript of ``array`` whose index on the first of ``axes`` is made of y names, on the second of x names."""
    for n in nodes:
        if not isinstance(n, ast.Subscript) or dotted(n.value) != array or not isinstance(n.slice, ast.Tuple):
            continue
        elts = n.slice.elts
        if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
            if axes != (-2, -1):
                continue
        if len(elts) < 2:
            continue
        first, second = (elts[0], elts[1]) if axes == (0, 1) else (elts[-2], elts[-1])
        if _only(first, _Y, _X) and _only(second, _X, _Y):
            return n
    return None


def _meets_x(nodes: list[ast.AST], width: str) -> ast.AST | None:
    """The first expression where the name ``width`` and an x name are operands of one operation or call."""
    for n in nodes:
        if isinstance(n, ast.BinOp):
            parts = [n.left, n.right]
        elif isinstance(n, ast.Compare):
            parts = [n.left, *n.comparators]
        elif isinstance(n, ast.Call) and dotted(n.func) in ("min", "max", "np.clip", "clip", "np.minimum",
                                                            "np.maximum", "torch.clamp", "range"):
            parts = list(n.args)
        else:
            continue
        direct = [p.id for p in parts if isinstance(p, ast.Name)]
        if width in direct and any(_X.match(d) for d in direct if d != width):
            return n
    return None


def shape_unpacked_width_first(ix: FileIndex, dim_name: Callable[[str], str | None]
                               ) -> Iterator[tuple[ast.Assign, str]]:
    """(the unpacking, the message) for each ``w, h = A.shape`` proven to hold the height in ``w``.

    ``dim_name``: axisscale's reader of height and width names (``"h"``/``"w"``/None)."""
    scopes = [n for n in ast.walk(ix.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        nodes = ix.scope_nodes(scope)
        for stmt in nodes:
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Tuple):
                continue
            elts = stmt.targets[0].elts
            if len(elts) not in (2, 3) or not all(isinstance(e, ast.Name) for e in elts[:2]):
                continue
            first, second = elts[0].id, elts[1].id
            if dim_name(first) != "w" or dim_name(second) != "h":
                continue
            got = _axes(stmt.value)
            if got is None:
                continue
            array, axes = got
            if len(elts) == 3 and axes != (0, 1):
                continue
            index = _indexed_y_first(nodes, array, axes)
            use = _meets_x(nodes, first) if index is not None else None
            if index is None or use is None:
                continue
            yield stmt, (
                f"`{ix.segment(stmt)}` names the first axis of `{array}`'s shape `{first}`, but `{array}` is indexed "
                f"rows by y (`{ix.segment(index)}`, line {index.lineno}): its shape lists the height first, so "
                f"`{first}` holds the height and `{second}` the width, and `{ix.segment(use)}` (line {use.lineno}) "
                f"bounds an x coordinate by the height: on a non-square `{array}` the points beyond the other "
                "axis's size are clipped or dropped while nothing fails")
