"""A box mirrored without swapping its corners (OVT531 ``box-flip-corners-unswapped``, issue 33).

A horizontal flip maps x to W - x, which reverses the order of the x coordinates: the flipped box's
left edge is the mirror of the old *right* edge.  Written ``[W - x1, y1, W - x2, y2]`` (or
``b[..., 0:4:2] = W - b[..., 0:4:2]``), every flipped box has x1 > x2: an impossible box whose
"width" is negative, so IoU, box losses and the anchors matched to it are computed on garbage for
every flipped sample (Nota-NetsPresso/netspresso-trainer#196: "it produces impossible box cases ...
Computed `x` coordinates should be swapped each other").  The same holds vertically for y1 and y2.

The rule, for boxes (some name of the statement, its unpacking or its function says ``box``/``bbox``):
- a four-element list, tuple or ``stack``/``tensor``/``array`` of one whose element 0 is ``W - a`` and
  element 2 is ``W - c`` (or 1 and 3 with ``H``), where ``a`` and ``c`` are coordinates 0 and 2 of the
  box in that order: ``b[..., 0]`` and ``b[..., 2]``, or the first and third names of an unpacking
  ``x1, y1, x2, y2 = box``;
- an assignment ``b[..., S] = W - b[..., S]`` with the same index ``S`` on both sides, ``S`` one of
  ``0:4:2``, ``1:4:2``, ``[0, 2]``, ``[1, 3]``, or ``0::4`` to ``3::4`` (rows of several boxes).
A trailing ``- 1`` (the pixel convention) changes nothing.  Quiet on ``0::2`` (a polygon's x
coordinates flip point by point), on ``[W - x2, y1, W - x1, y2]`` and on ``[2, 0]``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule

_BOX_WORDS = frozenset({"box", "boxes", "bbox", "bboxes", "bb", "bbs", "rect", "rects"})
_SEQ_CALLS = frozenset({"stack", "tensor", "as_tensor", "array", "asarray", "Tensor", "FloatTensor"})


def _boxy(names: set[str]) -> bool:
    return any(set(tokens(n)) & _BOX_WORDS for n in names)


def _mirrored(node: ast.AST) -> ast.AST | None:
    """``x`` when ``node`` is ``W - x`` (or ``W - x - 1``, ``(W - 1) - x``), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Constant):
        node = node.left  # W - x - 1
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and not isinstance(node.right, ast.Constant):
        return node.right
    return None


def _index_value(node: ast.AST) -> object:
    """The constant index of ``b[..., k]`` / ``b[:, k]`` / ``b[k]``, or None."""
    if not isinstance(node, ast.Subscript):
        return None
    sl = node.slice
    last = sl.elts[-1] if isinstance(sl, ast.Tuple) and sl.elts else sl
    return last.value if isinstance(last, ast.Constant) and isinstance(last.value, int) else None


def _unpacked(ix: FileIndex, name: ast.Name) -> tuple[int, str] | None:
    """(position, source) when ``name`` comes from an unpacking of four names in its scope."""
    scope = ix.enclosing_function(name) or ix.tree
    for node in ix.scope_nodes(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            elts = node.targets[0].elts
            ids = [e.id if isinstance(e, ast.Name) else None for e in elts]
            if len(elts) == 4 and name.id in ids:
                return ids.index(name.id), ast.unparse(node.value)
    return None


def _position(ix: FileIndex, node: ast.AST) -> tuple[int, set[str]] | None:
    k = _index_value(node)
    if k is not None:
        return k, {dotted(node.value) or ""}
    if isinstance(node, ast.Name):
        found = _unpacked(ix, node)
        if found:
            return found[0], {found[1], node.id}
    return None


def _elements(node: ast.AST) -> list[ast.AST] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) == 4:
        return node.elts
    if isinstance(node, ast.Call) and node.args and (dotted(node.func) or "").rsplit(".", 1)[-1] in _SEQ_CALLS:
        inner = node.args[0]
        if isinstance(inner, (ast.List, ast.Tuple)) and len(inner.elts) == 4:
            return inner.elts
    return None


def _context(ix: FileIndex, node: ast.AST) -> set[str]:
    stmt = ix.statement_of(node)
    names = {dotted(n) or "" for n in ast.walk(stmt) if isinstance(n, (ast.Name, ast.Attribute))}
    names |= {n.value for n in ast.walk(stmt) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    func = ix.enclosing_function(node)
    if func is not None:
        names.add(func.name)
        names |= {a.arg for a in func.args.args}
    return names


def _literal_hits(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        elts = _elements(node)
        if elts is None or isinstance(ix.parents.get(node), ast.Call) and _elements(ix.parents[node]) is not None:
            continue
        for first, second, axis in ((0, 2, "x"), (1, 3, "y")):
            a, c = _mirrored(elts[first]), _mirrored(elts[second])
            if a is None or c is None or _mirrored(elts[first + 1]) is not None:
                continue
            pa, pc = _position(ix, a), _position(ix, c)
            if not (pa and pc and pa[0] == first and pc[0] == second):
                continue
            if not _boxy(_context(ix, node) | pa[1] | pc[1]):
                continue
            yield _hit(node, axis, f"{ast.unparse(elts[first])}, ..., {ast.unparse(elts[second])}")


def _slice_key(node: ast.AST) -> tuple | None:
    """The last index when it picks box coordinates by kind: ``0:4:2``, ``1:4:2``, ``[0, 2]``, ``[1, 3]``, or
    every fourth column of rows of several boxes (``0::4`` ... ``3::4``); else None."""
    if not isinstance(node, ast.Subscript):
        return None
    sl = node.slice
    last = sl.elts[-1] if isinstance(sl, ast.Tuple) and sl.elts else sl
    if isinstance(last, ast.Slice) and all(p is None or isinstance(p, ast.Constant)
                                           for p in (last.lower, last.upper, last.step)):
        key = tuple(p.value if p is not None else None for p in (last.lower, last.upper, last.step))
        return key if key in ((0, 4, 2), (1, 4, 2), (0, None, 4), (1, None, 4), (2, None, 4), (3, None, 4)) else None
    if isinstance(last, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in last.elts):
        key = tuple(e.value for e in last.elts)
        return key if key in ((0, 2), (1, 3)) else None
    return None


def _slice_hits(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        key = _slice_key(target)
        source = _mirrored(node.value)
        if key is None or source is None or _slice_key(source) != key:
            continue
        if not _boxy(_context(ix, node)):
            continue
        axis = "x" if key[0] in (0, 2) else "y"
        yield _hit(node.value, axis, ast.unparse(node))


def _hit(node: ast.AST, axis: str, shown: str) -> Hit:
    size, order = ("W", "[2, 0]") if axis == "x" else ("H", "[3, 1]")
    return Hit("box-flip-corners-unswapped", node,
               f"a flipped box keeps its {axis} coordinates in their old order (`{shown}`): mirroring reverses "
               f"them, so every flipped box gets {axis}1 > {axis}2, an impossible box with negative size, and its "
               f"loss, IoU and anchor matching train on garbage for every flipped sample",
               fix=f"swap the two while mirroring: {axis}1' = {size} - {axis}2 and {axis}2' = {size} - {axis}1 (for "
                   f"slices, index the source in the reverse order, e.g. b[..., {order}])")


@rule("box-flip-corners-unswapped")
def box_flip_corners_unswapped(ix: FileIndex) -> Iterator[Hit]:
    """``torch.stack([W - x1, y1, W - x2, y2])``: a mirrored box with x1 > x2 (issue 33,
    Nota-NetsPresso/netspresso-trainer#196)."""
    yield from _literal_hits(ix)
    yield from _slice_hits(ix)
