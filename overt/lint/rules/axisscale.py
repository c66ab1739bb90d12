"""An x coordinate scaled by the image's height, or a y coordinate by its width (OVT546
``coordinates-scaled-by-other-axis``; issue 33, w203, w195).

Points, boxes and flow vectors list their coordinates x first (``(x, y)``, ``(x1, y1, x2, y2)``,
``[flow_x, flow_y]``), while an image's shape lists its height first (``(H, W)``, ``img.shape[-2:]``,
ultralytics' ``orig_shape``).  Normalising, resizing or rescaling a coordinate must use its own axis: x
with the width, y with the height.  Written the other way round, every coordinate on a non-square image
is stretched, boxes leave the image, a resized flow points elsewhere -- and nothing fails (the metric
scored on them, or the model trained on them, is simply worse).

Proven from the code: ``T[..., c] op= E`` or ``T[..., c] op E`` (``op`` a multiplication or a division;
``c`` a constant, the only index that is not a full slice) where

- ``T`` lists x first: its name, or the name of the function it is in, holds ``xy``, ``xyxy``, ``xywh``,
  ``cxcywh``, ``xyxyxyxy`` or ``flow`` (optical flow is ``(u, v)``), or it was bound from a ``stack``/
  ``cat`` of a list whose first two names are an x and a y (``[x1, y1]``, ``[cx, cy]``), directly or
  through nested stacks and rebindings; ``c`` even is x, odd is y;
- ``E`` is the other axis's size: a name that is a height (``h``, ``H``, ``height``, ``img_h``, ``newh``,
  ``oldh``, ``orig_h`` ...) or a width, ``S[0]``/``S[1]`` of a name holding ``shape`` (``(H, W)``),
  ``X.shape[-2]``/``X.shape[-1]``, ``X.size(-2)``/``X.size(-1)``, or a ratio or product of such sizes of
  one axis (``newh / oldh``).

Silent on anything else: ``size`` names (PIL's ``img.size`` is ``(W, H)``), ``shape[0]`` of anything not
named a shape, a constant, an index that is a variable, arrays named without ``xy``/``flow`` (TensorFlow's
boxes are ``(y1, x1, y2, x2)``; keypoints may be ``(row, col)``), ``yx``/``ij``/``rc`` names.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.shapeunpack import shape_unpacked_width_first

_XFIRST = re.compile(r"(?:^|_|c)xy|cxcy|(?:^|_)(?:flow|flows|flo)(?:$|_|[0-9])", re.I)
_YFIRST = re.compile(r"(?:^|_)yx|(?:^|_)ij(?:$|_)|(?:^|_)rc(?:$|_)", re.I)
#: words a height or width name may carry besides ``h``/``height`` (``new_h``, ``img_height``, ``oldh``)
_AROUND = frozenset({"img", "im", "image", "orig", "original", "new", "old", "src", "dst", "in", "out", "input",
                     "output", "target", "tgt", "crop", "pad", "resized", "ori", "raw", "full", "frame", "canvas",
                     "patch", "0", "1", "i", "o", "n"})
_SIDE = {"h": "h", "height": "h", "w": "w", "width": "w"}


def _dim_name(name: str) -> str | None:
    """"h"/"w" for the name of an image's height/width (``H``, ``img_h``, ``newh``, ``orig_width``)."""
    words = [t for t in re.split(r"_+", name.lower()) if t]
    if len(words) == 1:
        word = words[0]
        for prefix in sorted(_AROUND, key=len, reverse=True):
            for side in ("height", "width", "h", "w"):
                if word in (side, prefix + side, side + prefix) and (word == side or len(prefix) > 1 or
                                                                      prefix in ("0", "1", "i", "o", "n")):
                    return _SIDE[side]
        return None
    sides = [w for w in words if w in _SIDE]
    if len(sides) == 1 and all(w in _SIDE or w in _AROUND for w in words):
        return _SIDE[sides[0]]
    return None


_X_NAMES = re.compile(r"^(?:x|x[0-9]|x_?min|x_?max|cx|xc|x_c|left|x_?left)$", re.I)
_Y_NAMES = re.compile(r"^(?:y|y[0-9]|y_?min|y_?max|cy|yc|y_c|top|y_?top)$", re.I)
_STACK = frozenset({"stack", "cat", "concatenate", "hstack", "vstack", "column_stack", "tensor", "array"})


def _size_axis(node: ast.AST) -> str | None:
    """"h" or "w" when ``node`` is the height or width of an image, else None."""
    if isinstance(node, ast.Name):
        if _YFIRST.search(node.id):
            return None
        return _dim_name(node.id)
    if isinstance(node, ast.Attribute):
        return _size_axis(ast.Name(id=node.attr))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        k = node.slice.value
        holder = node.value
        if isinstance(holder, ast.Attribute) and holder.attr == "shape":
            return {-2: "h", -1: "w"}.get(k)
        name = dotted(holder) or ""
        if "shape" in name.rsplit(".", 1)[-1].lower() and "size" not in name.lower():
            return {0: "h", 1: "w"}.get(k)
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.UnaryOp) \
            and isinstance(node.slice.op, ast.USub) and isinstance(node.slice.operand, ast.Constant) \
            and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return {2: "h", 1: "w"}.get(node.slice.operand.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and len(node.args) == 1:
        arg = node.args[0]
        if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub) and isinstance(arg.operand, ast.Constant):
            return {2: "h", 1: "w"}.get(arg.operand.value)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult, ast.FloorDiv)):
        left, right = _size_axis(node.left), _size_axis(node.right)
        if isinstance(node.right, ast.Constant):
            return left
        if isinstance(node.left, ast.Constant):
            return right
        return left if left is not None and left == right else None
    if isinstance(node, ast.Call) and dotted(node.func) in ("float", "int") and len(node.args) == 1:
        return _size_axis(node.args[0])
    return None


def _component(node: ast.AST) -> tuple[str, int] | None:
    """(array, c) for ``T[..., c]``, ``T[:, c]``, ``T[c]`` with every other index a full slice."""
    if not isinstance(node, ast.Subscript) or dotted(node.value) is None:
        return None
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    consts = [p for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, int)
              and not isinstance(p.value, bool)]
    rest = [p for p in parts if p not in consts]
    if len(consts) != 1 or not all(
            (isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None)
            or (isinstance(p, ast.Constant) and p.value is Ellipsis) for p in rest):
        return None
    if consts[0].value < 0 or consts[0].value > 7:
        return None
    return dotted(node.value) or "", consts[0].value


def _xy_names(node: ast.AST) -> bool:
    """A ``stack``/``cat`` of a list whose first two elements are an x and a y (names or nested stacks)."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    name = (dotted(node.func) or "").rsplit(".", 1)[-1]
    if name not in _STACK:
        return False
    items = node.args[0]
    if not isinstance(items, (ast.List, ast.Tuple)) or len(items.elts) < 2:
        return False
    a, b = items.elts[0], items.elts[1]
    if isinstance(a, ast.Name) and isinstance(b, ast.Name):
        return bool(_X_NAMES.match(a.id) and _Y_NAMES.match(b.id))
    return _xy_names(a) and _xy_names(b)


def _x_first(ix: FileIndex, array: str, node: ast.AST, scope_nodes: list[ast.AST]) -> str | None:
    """Why ``array`` lists x first (a name, a function name, a construction), or None."""
    base = array.rsplit(".", 1)[-1]
    if _YFIRST.search(base):
        return None
    if _XFIRST.search(base):
        return f"its name `{base}`"
    func = ix.enclosing_function(node)
    if func is not None and _XFIRST.search(func.name) and not _YFIRST.search(func.name):
        return f"the function `{func.name}`"
    bound = [n for n in scope_nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == base]
    seen = {base}
    while bound:
        value = bound[0].value
        if _xy_names(value):
            return f"it is built from (x, y) pairs at line {value.lineno}"
        inner = value.func.value if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) else None
        if not isinstance(inner, ast.Name) or inner.id in seen:
            return None
        seen.add(inner.id)  # ``corners = corners.clone()``: the binding before it
        bound = [n for n in scope_nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == inner.id
                 and n.lineno < value.lineno]
        bound = bound[-1:]
    return None


def _scaled(nodes: list[ast.AST]) -> Iterator[tuple[ast.AST, ast.AST, ast.AST]]:
    """(statement or expression, the component, the factor) for every ``T[c] op= E`` and ``T[c] op E``."""
    for n in nodes:
        if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Mult, ast.Div)):
            yield n, n.target, n.value
        elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Div)):
            yield n, n.left, n.right
            if isinstance(n.op, ast.Mult):
                yield n, n.right, n.left


@rule("coordinates-scaled-by-other-axis")
def coordinates_scaled_by_other_axis(ix: FileIndex) -> Iterator[Hit]:
    """x coordinates scaled by a height, y coordinates by a width."""
    scopes = [ix.tree] + [n for n in ast.walk(ix.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        nodes = ix.scope_nodes(scope)
        named: set[str] = set()
        for stmt, target, factor in _scaled(nodes):
            comp = _component(target)
            if comp is None or comp[0] in named:
                continue
            array, c = comp
            axis = _size_axis(factor)
            coord = "x" if c % 2 == 0 else "y"
            if axis is None or (coord, axis) in (("x", "w"), ("y", "h")):
                continue
            why = _x_first(ix, array, stmt, nodes)
            if why is None:
                continue
            named.add(array)  # one finding per array and scope: the other component is usually swapped too
            size = "height" if axis == "h" else "width"
            own = "width" if axis == "h" else "height"
            yield Hit("coordinates-scaled-by-other-axis", stmt,
                      f"`{ix.segment(stmt)}` scales {'an' if coord == 'x' else 'a'} {coord} coordinate (component {c} of `{array}`, which lists x "
                      f"first: {why}) by the image's {size} (`{ix.segment(factor)}`; an image shape lists height "
                      f"before width): on any non-square image every {coord} is stretched by the aspect ratio, so "
                      "boxes, points or flow vectors land elsewhere while nothing fails",
                      fix=f"scale x coordinates by the width and y coordinates by the height: use the image's {own} "
                          f"for component {c} of `{array}`")
    for stmt, message in shape_unpacked_width_first(ix, _dim_name):
        names = stmt.targets[0].elts
        yield Hit("coordinates-scaled-by-other-axis", stmt, message,
                  fix=f"unpack the shape height first: `{names[1].id}, {names[0].id}"
                      f"{', ' + names[2].id if len(names) == 3 and isinstance(names[2], ast.Name) else ''} = ...`")
