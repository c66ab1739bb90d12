"""An error computed on unsigned-integer images, where the difference wraps (part of OVT824
``metric-off-definition``).

Images are often quantised to 8 bits before they are scored (``(255 * x).astype(np.uint8)``,
``x.mul(255).byte()``, ``.to(torch.uint8)``).  In an unsigned dtype ``a - b`` wraps around below zero
(``1 - 2 = 255``), and squaring wraps again, so an absolute or squared error of two such arrays (MAE, MSE,
RMSE, PSNR) is dominated by overflow, not by the model (ybarancan/efficient_spectral_cnn#5).

Proven from the code: both operands of the subtraction are unsigned -- written as such a conversion, or
a name every binding of which in the scope is one (dtype-keeping steps such as ``squeeze``, ``reshape``,
``[...]`` after it allowed) -- and the difference (directly, after a cast, or through a name bound once
to it) is taken as an error: ``abs``, ``np.abs``, ``.abs()``, ``** 2``, ``np.square``, ``.pow(2)``.
A cast of either operand before the subtraction (``a.astype(np.float64) - b``) makes it silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit

_UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64", "ubyte", "ushort", "uint"})
#: steps that keep an array's dtype
_KEEP = frozenset({"squeeze", "unsqueeze", "reshape", "view", "transpose", "permute", "copy", "clone", "flatten",
                   "ravel", "contiguous", "cpu", "numpy", "detach", "swapaxes", "moveaxis", "clip", "clamp"})
_CASTS = frozenset({"astype", "float", "double", "to", "type", "half", "long", "int"})
_ABS = frozenset({"abs", "np.abs", "numpy.abs", "torch.abs", "np.absolute", "np.fabs", "np.square", "numpy.square",
                  "torch.square"})


def _dtype_unsigned(node: ast.AST | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in _UNSIGNED
    name = dotted(node)
    return bool(name) and name.rsplit(".", 1)[-1] in _UNSIGNED and name.split(".")[0] in ("np", "numpy", "torch")


def _unsigned_call(node: ast.AST) -> bool:
    """``node`` makes an unsigned array: a conversion, possibly followed by dtype-keeping steps."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
            continue
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _KEEP:
            node = func.value
            continue
        break
    func = node.func
    name = dotted(func) or ""
    if isinstance(func, ast.Attribute) and func.attr in ("astype", "to", "type") and node.args:
        return _dtype_unsigned(node.args[0]) or _dtype_unsigned(kwarg(node, "dtype"))
    if isinstance(func, ast.Attribute) and func.attr == "to":
        return _dtype_unsigned(kwarg(node, "dtype"))
    if isinstance(func, ast.Attribute) and func.attr == "byte" and not node.args:
        return True
    if name.rsplit(".", 1)[-1] in _UNSIGNED and name.split(".")[0] in ("np", "numpy"):
        return True
    if name.split(".")[0] in ("np", "numpy", "torch") and name.rsplit(".", 1)[-1] in ("array", "asarray", "tensor",
                                                                                      "as_tensor"):
        if kwarg(node, "dtype") is None and len(node.args) == 1:
            return _eight_bit_image(node.args[0])  # np.array(Image.open(p).convert("RGB"))
        return _dtype_unsigned(kwarg(node, "dtype"))
    return _eight_bit_image(node)


#: PIL modes whose pixels are 8-bit unsigned
_EIGHT_BIT_MODES = frozenset({"RGB", "L", "RGBA", "P", "CMYK", "YCbCr", "LAB", "HSV"})


def _eight_bit_image(node: ast.AST) -> bool:
    """An 8-bit image as read from disk: ``cv2.imread(p)`` (colour or grayscale flags), a PIL image converted to an
    8-bit mode (``Image.open(p).convert("RGB")``)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("resize", "crop", "rotate"):
        node = node.func.value  # a PIL image resized, cropped or rotated keeps its mode
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func) or ""
    if name == "cv2.imread" and node.args:
        flag = node.args[1] if len(node.args) > 1 else kwarg(node, "flags")
        return flag is None or dotted(flag) in ("cv2.IMREAD_COLOR", "cv2.IMREAD_GRAYSCALE") or (
            isinstance(flag, ast.Constant) and flag.value in (0, 1))
    if isinstance(node.func, ast.Attribute) and node.func.attr == "convert" and node.args:
        mode = node.args[0]
        return isinstance(mode, ast.Constant) and mode.value in _EIGHT_BIT_MODES
    return False


Binding = tuple[int, "ast.AST | None", ast.AST]  # (line, the value or None, the binding statement)


def _bindings(ix: FileIndex, scope: ast.AST | None) -> dict[str, list[Binding]]:
    out: dict[str, list[Binding]] = {}
    for node in ix.scope_nodes(scope if scope is not None else ix.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Name):
                        out.setdefault(e.id, []).append((node.lineno, node.value if e is t else None, node))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) or isinstance(node, ast.comprehension):
            for e in ast.walk(node.target):
                if isinstance(e, ast.Name):
                    out.setdefault(e.id, []).append((getattr(node, "lineno", 0), None, node))
        elif isinstance(node, ast.arguments):
            for a in node.posonlyargs + node.args + node.kwonlyargs:
                out.setdefault(a.arg, []).append((0, None, node))
    return out


def _unconditional(ix: FileIndex, stmt: ast.AST) -> bool:
    """``stmt`` runs whenever its scope does (only ``with`` and ``try`` blocks around it)."""
    for anc in ix.ancestors(stmt):
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return True
        if not isinstance(anc, (ast.With, ast.AsyncWith, ast.Try)):
            return False
    return True


def _unsigned(ix: FileIndex, node: ast.AST, bound: dict[str, list[Binding]], scope: ast.AST | None) -> bool:
    """``node`` is an unsigned array: a conversion, or a name whose binding in force is one (the last one
    before the use, a statement of the scope's own body, and no other binding in a loop around the use)."""
    if not isinstance(node, ast.Name):
        return _unsigned_call(node)
    before = [b for b in bound.get(node.id, []) if b[0] < node.lineno]
    if not before:
        return False
    line, value, stmt = max(before, key=lambda b: b[0])
    if value is None or not _unsigned_call(value) or not _unconditional(ix, stmt):
        return False
    for loop in ix.enclosing_loops(node):
        if any(b[2] is not stmt and b[0] >= loop.lineno and b[0] <= (loop.end_lineno or b[0])
               for b in bound.get(node.id, [])):
            return False
    return True


def _error_of(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    """The abs or square that takes ``node`` (through casts) as an error, or None."""
    cur = node
    while True:
        up = ix.parents.get(cur)
        if isinstance(up, ast.Attribute) and up.attr in _CASTS | {"abs", "pow", "square"}:
            call = ix.parents.get(up)
            if not isinstance(call, ast.Call) or call.func is not up:
                return None
            squared = up.attr == "pow" and len(call.args) == 1 and isinstance(call.args[0], ast.Constant) \
                and call.args[0].value == 2
            if up.attr in ("abs", "square") or squared:
                return call
            cur = call
            continue
        if isinstance(up, ast.Call) and cur in up.args:
            name = dotted(up.func) or ""
            if name in _ABS:
                return up
            if name in ("float", "np.float32", "np.float64", "numpy.float64"):
                cur = up
                continue
            return None
        if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Pow) and up.left is cur \
                and isinstance(up.right, ast.Constant) and up.right.value == 2:
            return up
        return None


def unsigned_differences(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for an absolute or squared error of two unsigned-integer arrays."""
    cache: dict[int, dict[str, list[Binding]]] = {}
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            continue
        scope = ix.enclosing_function(node)
        bound = cache.setdefault(id(scope), _bindings(ix, scope))
        if not (_unsigned(ix, node.left, bound, scope) and _unsigned(ix, node.right, bound, scope)):
            continue
        error = _error_of(ix, node)
        if error is None:
            parent = ix.parents.get(node)
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) \
                    and len(bound.get(parent.targets[0].id, [])) == 1:
                name = parent.targets[0].id
                uses = [n for n in (ix.scope_nodes(scope if scope is not None else ix.tree))
                        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
                error = next((e for e in (_error_of(ix, u) for u in uses) if e is not None), None)
        if error is None:
            continue
        a, b = ix.segment(node.left), ix.segment(node.right)
        yield Hit("metric-off-definition", node,
                  f"`{ix.segment(node)}` subtracts two unsigned-integer arrays and takes the result as an error "
                  f"(`{ix.segment(error)}`, line {error.lineno}): in an unsigned dtype a difference below zero wraps "
                  "around (1 - 2 = 255 in uint8) and a square wraps again, so the error reported is dominated by "
                  "overflow, not by the model",
                  fix=f"convert both to a signed or floating dtype before subtracting: `{a}.astype(np.float64) - "
                      f"{b}.astype(np.float64)` (torch: `.float()`), or quantise after computing the error")
