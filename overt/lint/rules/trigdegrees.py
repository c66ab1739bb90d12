"""A sine or cosine taken of a grid laid out in degrees (OVT856 ``trig-of-degrees``, lint face; issue 33, the wild
corpus's w469).

NumPy's and PyTorch's ``sin``/``cos``/``tan`` take radians.  A grid of angles written in degrees -- latitudes
``np.linspace(-87.5, 87.5, 36)``, longitudes ``np.arange(0, 360, 5)``, rotation angles ``range(0, 360, 15)`` --
handed to them unconverted is read as that many radians: 45 degrees becomes 45 radians, the features wrap around
every 6.28 units, two neighbouring grid points land on unrelated values, and a model fed ``sin(lat)``/``cos(lat)``
can no longer tell where a node is (openclimatefix/graph_weather#51: ``np.sin(lat_lons)`` for
``np.sin(lat_lons * np.pi / 180)``).  Shapes and ranges stay right, so nothing fails.

The premise: a grid of literal values that spans a degree range -- its extreme endpoint (or cell edge, half a
step beyond the outermost point) is 90, 180, 270 or 360 in absolute value -- is an angle in degrees; a correct
program converts it (``np.radians``, ``* np.pi / 180``, ``np.deg2rad``) before a trigonometric function.

Reported on ``np.sin(a)``/``np.cos(a)``/``np.tan(a)`` (also ``numpy.``, ``torch.``, ``a.sin()``) where ``a`` is,
directly or through names bound (every binding in the function, else the module) to it, such a grid: a
``linspace``/``arange``/``range`` of numeric literals, a list of numeric literals, and what only reshapes,
stacks, indexes or converts them to an array or tensor without arithmetic (``meshgrid``, ``stack``,
``concatenate``, ``ravel``, ``reshape``, ``np.array``, ``torch.tensor``, ``x[:, 0]``).  Silent when any
arithmetic sits between the grid and the function (a product with a frequency is a deliberate positional or
Fourier feature; a division or product by pi/180 is the conversion), on grids whose extreme is not a degree
landmark (``np.linspace(0, 100, 1000)``, a time axis in radians), on parameters and on names bound more than one
way.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_TRIG = {"sin", "cos", "tan"}
_ROOTS = {"np", "numpy", "torch", "jnp"}
_GRIDS = {"linspace", "arange", "range"}
_DRAWS = {"uniform", "randint"}  # random angles: np.random.uniform(0, 360), random.randint(-180, 180), rng.uniform
_DRAW_ROOTS = {"np.random", "numpy.random", "random", "torch.distributions"}
_STACKS = {"stack", "concatenate", "cat", "column_stack", "vstack", "hstack", "dstack", "meshgrid"}
_WRAPS = {"array", "asarray", "tensor", "as_tensor", "from_numpy", "asanyarray", "ascontiguousarray",
          "float", "double", "astype", "to", "ravel", "flatten", "reshape", "view", "squeeze", "unsqueeze",
          "transpose", "numpy", "copy", "clone", "expand_dims"}
_LANDMARKS = (90.0, 180.0, 270.0, 360.0)
_MAX_DEPTH = 12


def _number(node: ast.AST) -> float | None:
    """The value of a numeric literal (with an optional minus sign)."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return sign * float(node.value)
    return None


def _landmark(value: float) -> bool:
    return any(abs(abs(value) - mark) < 1e-6 for mark in _LANDMARKS)


def _grid_extreme(call: ast.Call, name: str) -> float | None:
    """The degree landmark a literal ``linspace``/``arange``/``range`` reaches (an endpoint, or the edge half a
    step beyond its outermost point), or None when it reaches none."""
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    args = list(call.args)
    if name == "linspace":
        start = _number(args[0]) if args else _number(kw.get("start", ast.Constant(None)))
        stop = _number(args[1]) if len(args) > 1 else _number(kw.get("stop", ast.Constant(None))) \
            if "stop" in kw else _number(kw.get("end", ast.Constant(None)))
        num = _number(args[2]) if len(args) > 2 else _number(kw["num"]) if "num" in kw else \
            _number(kw["steps"]) if "steps" in kw else None
        if start is None or stop is None:
            return None
        ends = [start, stop]
        if num is not None and num > 1:
            half = abs(stop - start) / (num - 1) / 2
            ends += [start - half if start < stop else start + half, stop + half if start < stop else stop - half]
    else:
        values = [_number(a) for a in args]
        if name in _DRAWS:
            values = values[:2]
            if len(values) < 2:
                return None
        if not values or any(v is None for v in values) or len(values) > 3:
            return None
        if len(values) == 1:
            start, stop, step = 0.0, values[0], 1.0
        else:
            start, stop = values[0], values[1]
            step = values[2] if len(values) == 3 else 1.0
        assert start is not None and stop is not None and step is not None
        if step == 0:
            return None
        ends = [start, stop]
    if max(abs(e) for e in ends) > 360.0 + 1e-6 or max(abs(e) for e in ends) <= 6.3:
        return None
    marks = [e for e in ends if _landmark(e)]
    return max(marks, key=abs) if marks else None


def _call_name(node: ast.Call) -> tuple[str | None, str | None]:
    """(root, last name) of a call: ``np.linspace`` -> ("np", "linspace"), ``x.ravel`` -> (None, "ravel"),
    ``range`` -> ("", "range")."""
    func = node.func
    if isinstance(func, ast.Name):
        return "", func.id
    if isinstance(func, ast.Attribute):
        root = dotted(func.value)
        return (root if root in _ROOTS else None), func.attr
    return None, None


class _Tracer:
    """Follows an expression back to a literal degree grid through names and shape-only operations."""

    def __init__(self, ix: FileIndex, site: ast.AST):
        self.ix = ix
        self.site = site
        self.seen: set[str] = set()

    def grid(self, node: ast.AST, depth: int = 0) -> ast.AST | None:
        """The literal grid ``node`` is made of, when every way it was made is one reaching a degree landmark."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Name):
            return self._name(node, depth)
        if isinstance(node, ast.Subscript):
            return self.grid(node.value, depth + 1)
        if isinstance(node, ast.Attribute) and node.attr == "T":
            return self.grid(node.value, depth + 1)
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._literal_list(node) or self._all(node.elts, depth)
        if isinstance(node, ast.Call):
            root, name = _call_name(node)
            if name in _GRIDS and (root in _ROOTS or (root == "" and name == "range")):
                return node if _grid_extreme(node, name) is not None else None
            if name in _DRAWS and isinstance(node.func, ast.Attribute) and (
                    dotted(node.func.value) in _DRAW_ROOTS or isinstance(node.func.value, ast.Name)):
                return node if _grid_extreme(node, name) is not None else None
            if name in _STACKS and root in _ROOTS and node.args:
                first = node.args[0]
                if name == "meshgrid":
                    return self._all(node.args, depth)
                return self.grid(first, depth + 1)
            if name in _WRAPS:
                if isinstance(node.func, ast.Attribute) and root is None:
                    return self.grid(node.func.value, depth + 1)  # x.ravel(), x.astype(...)
                if root in _ROOTS and node.args:
                    return self.grid(node.args[0], depth + 1)  # np.array(x), torch.tensor(x)
        return None

    def _all(self, elts: list[ast.expr], depth: int) -> ast.AST | None:
        found = [self.grid(e, depth + 1) for e in elts]
        return found[0] if found and all(f is not None for f in found) else None

    @staticmethod
    def _literal_list(node: ast.List | ast.Tuple) -> ast.AST | None:
        values = [_number(e) for e in node.elts]
        if len(values) < 3 or any(v is None for v in values):
            return None
        top = max(abs(v) for v in values if v is not None)
        if not _landmark(top) or any(v is not None and v != int(v) for v in values):
            return None
        return node

    def _name(self, node: ast.Name, depth: int) -> ast.AST | None:
        if node.id in self.seen:
            return None
        self.seen.add(node.id)
        values = self._bindings(node)
        if not values:
            return None
        found = [self.grid(v, depth + 1) for v in values]
        return found[0] if all(f is not None for f in found) else None

    def _bindings(self, node: ast.Name) -> list[ast.AST] | None:
        """What ``node``'s name is bound to in its function (else the module): a value per plain binding, the
        matching ``meshgrid`` argument for a tuple unpacked from one; None when bound any other way."""
        ix = self.ix
        fn = ix.enclosing_function(node)
        nodes = ix.scope_nodes(fn) if fn is not None else ix.stmts_nodes(ix.tree.body)
        if fn is not None:
            a = fn.args
            params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p is not None}
            if node.id in params:
                return None
        values = self._values(nodes, node.id)
        if values is None:
            return None
        if not values and fn is not None:
            values = self._values(ix.stmts_nodes(ix.tree.body), node.id)
        return values

    @staticmethod
    def _values(nodes: list[ast.AST], target: str) -> list[ast.AST] | None:
        values: list[ast.AST] = []
        for n in nodes:
            if isinstance(n, (ast.Assign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id == target:
                        if n.value is None:
                            return None
                        values.append(n.value)
                    elif isinstance(t, (ast.Tuple, ast.List)) and any(
                            isinstance(e, ast.Name) and e.id == target for e in ast.walk(t)):
                        value = n.value
                        if not (isinstance(value, ast.Call) and _call_name(value)[1] == "meshgrid"
                                and all(isinstance(e, ast.Name) for e in t.elts)
                                and len(t.elts) == len(value.args)):
                            return None
                        index = next(i for i, e in enumerate(t.elts) if isinstance(e, ast.Name) and e.id == target)
                        values.append(value.args[index])
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == target:
                return None
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                    isinstance(e, ast.Name) and e.id == target for e in ast.walk(n.target)):
                if not (isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Call)):
                    return None
                values.append(n.iter)  # for angle in range(0, 360, 15): each angle is one of the grid's values
            elif isinstance(n, ast.withitem) and n.optional_vars is not None and any(
                    isinstance(e, ast.Name) and e.id == target for e in ast.walk(n.optional_vars)):
                return None
            elif isinstance(n, ast.NamedExpr) and n.target.id == target:
                return None
            elif isinstance(n, (ast.Global, ast.Nonlocal)) and target in n.names:
                return None
        return values


def _trig_argument(node: ast.Call) -> tuple[str, ast.AST] | None:
    """(function name, argument) of ``np.sin(a)`` / ``torch.cos(a)`` / ``a.sin()``."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _TRIG:
        return None
    root = dotted(func.value)
    if root in _ROOTS or root == "math":
        return (f"{root}.{func.attr}", node.args[0]) if len(node.args) == 1 else None
    if not node.args and not node.keywords and root is not None:
        return f".{func.attr}()", func.value
    return None


@rule("trig-of-degrees")
def trig_of_degrees(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Call):
            continue
        found = _trig_argument(node)
        if found is None:
            continue
        func, arg = found
        grid = _Tracer(ix, node).grid(arg)
        if grid is None:
            continue
        text = ix.segment(arg)
        made = "" if grid is arg else f", made from `{ix.segment(grid)}` (line {grid.lineno})"
        yield Hit("trig-of-degrees", node,
                  f"`{func}` is taken of `{text}`{made}: a grid that reaches 90, 180 or 360, an angle in degrees, "
                  "while sin/cos/tan take radians. Each degree is read as a radian, so the values wrap around "
                  "every 6.28 degrees and neighbouring points get unrelated features (sin of 45 degrees computed "
                  "as sin of 45 radians): a model fed them cannot tell the positions apart, with no error",
                  fix=f"convert to radians first: `np.radians({text})` or `({text}) * np.pi / 180`")
