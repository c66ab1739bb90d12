"""A tensor divided by a factor that was defined as a reciprocal (OVT835 ``divided-by-reciprocal``, lint face;
issue 33, the wild corpus's w241).

A scale written as a reciprocal -- ``self.scale = head_dim ** -0.5``, ``inv_std = (var + eps).rsqrt()``,
``inv_temp = 1.0 / tau`` -- is a factor to multiply by: its definition already did the dividing.  Dividing a
tensor by it multiplies the tensor by the quantity the definition inverted, so the result is off by the square
of the intended scale (esceptico/perceiver-io#9: ``q @ k.transpose(-2, -1) / self.scale`` with ``self.scale =
qk_head_dim ** -0.5`` makes the attention logits ``head_dim`` times too large and the softmax saturates).  A
program that wants ``x * d ** 0.5`` writes that; dividing by ``d ** -0.5`` is the same double inversion wherever
it appears (a normalisation by an inverse standard deviation, logits divided by an inverse temperature).

Reported on ``a / s`` (and ``a /= s``) where ``s`` is a reciprocal written in place (``x ** -k``, ``1 / x``,
``torch.rsqrt(x)``, ``x.rsqrt()``, ``x.reciprocal()``, ``pow(x, -k)``) or a name or ``self`` attribute every one of
whose bindings in its scope (the function, else the module; the class's methods and body for an attribute) is
such a reciprocal.  Silent when the dividend is a constant (``2 * math.pi / inv_freq`` turns a frequency into a
wavelength: a reciprocal of a reciprocal on purpose), when the name is a parameter or is bound anywhere to
something else (augmented, a loop target, a tuple), and on a divisor read from anywhere else.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_RECIPROCAL_CALLS = {"rsqrt", "reciprocal"}
_CONST_ROOTS = {"math", "np", "numpy", "torch"}


def _negative_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
        return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool) and node.value > 0
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
        and not isinstance(node.value, bool) and node.value < 0


def _reciprocal(node: ast.AST | None) -> str | None:
    """What ``node`` is the reciprocal of (its source-like text), when it is written as one."""
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow) and _negative_number(node.right):
            return "pow"
        if isinstance(node.op, ast.Div) and isinstance(node.left, ast.Constant) and node.left.value in (1, 1.0) \
                and not isinstance(node.left.value, bool):
            return "div"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in _RECIPROCAL_CALLS:
            return "call"
        if name in ("pow", "power") and len(node.args) == 2 and _negative_number(node.args[1]):
            return "pow"
    return None


def _constant_like(node: ast.AST) -> bool:
    """Numbers, ALL_CAPS names and ``math.pi``-style constants combined by arithmetic."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.Attribute):
        root = dotted(node)
        return bool(root) and root.split(".")[0] in _CONST_ROOTS and root.count(".") == 1
    if isinstance(node, ast.BinOp):
        return _constant_like(node.left) and _constant_like(node.right)
    if isinstance(node, ast.UnaryOp):
        return _constant_like(node.operand)
    return False


def _bindings_in(ix: FileIndex, nodes: list[ast.AST], target: str) -> list[ast.expr] | None:
    """The values bound to ``target`` (a name or ``self.attr``) by plain assignments among ``nodes``; None when
    it is also bound some other way (augmented, a loop or ``with`` target, unpacked, deleted)."""
    values: list[ast.expr] = []
    for n in nodes:
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if dotted(t) == target:
                    if n.value is None:
                        return None
                    values.append(n.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and any(dotted(e) == target for e in ast.walk(t)):
                    return None
        elif isinstance(n, ast.AugAssign) and dotted(n.target) == target:
            return None
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and \
                any(dotted(e) == target for e in ast.walk(n.target)):
            return None
        elif isinstance(n, ast.withitem) and n.optional_vars is not None and \
                any(dotted(e) == target for e in ast.walk(n.optional_vars)):
            return None
        elif isinstance(n, ast.NamedExpr) and dotted(n.target) == target:
            return None
        elif isinstance(n, ast.Delete) and any(dotted(t) == target for t in n.targets):
            return None
    return values


def _params(fn: ast.AST) -> set[str]:
    a = fn.args  # type: ignore[attr-defined]
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p is not None}


def _definition(ix: FileIndex, divisor: ast.AST) -> ast.expr | None:
    """The reciprocal ``divisor`` is, or was bound to (its one binding, or the first of several that all are)."""
    if _reciprocal(divisor):
        return divisor  # type: ignore[return-value]
    target = dotted(divisor)
    if not target:
        return None
    if isinstance(divisor, ast.Name):
        fn = ix.enclosing_function(divisor)
        if fn is not None:
            if target in _params(fn):
                return None
            values = _bindings_in(ix, ix.scope_nodes(fn), target)
            if values is None:
                return None
            if not values:
                if any(isinstance(n, (ast.Global, ast.Nonlocal)) and target in n.names for n in ix.scope_nodes(fn)):
                    return None
                values = _bindings_in(ix, ix.stmts_nodes(ix.tree.body), target)
        else:
            values = _bindings_in(ix, ix.stmts_nodes(ix.tree.body), target)
    elif isinstance(divisor, ast.Attribute) and isinstance(divisor.value, ast.Name) and divisor.value.id == "self":
        cls = ix.enclosing_class(divisor)
        if cls is None:
            return None
        nodes = [n for stmt in cls.body for n in ast.walk(stmt)]
        values = _bindings_in(ix, nodes, target)
        if values is not None:
            body = _bindings_in(ix, [s for s in cls.body if isinstance(s, (ast.Assign, ast.AnnAssign))],
                                divisor.attr)
            if body is None:
                return None
            values += body
        if values and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
                          for n in nodes):
            return None
    else:
        return None
    if not values or not all(_reciprocal(v) for v in values):
        return None
    return values[0]


def _inverted(ix: FileIndex, rec: ast.expr) -> str:
    """The quantity ``rec`` is the reciprocal of, as source text."""
    if isinstance(rec, ast.BinOp) and isinstance(rec.op, ast.Pow):
        power = ix.segment(rec.right).lstrip("(").rstrip(")").strip().lstrip("-").strip()
        base = ix.segment(rec.left)
        if isinstance(rec.left, (ast.BinOp, ast.UnaryOp)):
            base = f"({base})"
        return f"{base} ** {power}"
    if isinstance(rec, ast.BinOp):
        return ix.segment(rec.right)
    if isinstance(rec, ast.Call):
        func = rec.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        arg = ix.segment(func.value) if isinstance(func, ast.Attribute) and not rec.args else \
            ix.segment(rec.args[0]) if rec.args else "its argument"
        if name == "rsqrt":
            return f"sqrt({arg})"
        if name in ("pow", "power") and len(rec.args) == 2:
            return f"{arg} ** {ix.segment(rec.args[1]).lstrip('-').strip()}"
        return arg
    return ix.segment(rec)


@rule("divided-by-reciprocal")
def divided_by_reciprocal(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            dividend, divisor = node.left, node.right
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div):
            dividend, divisor = node.target, node.value
        else:
            continue
        if _constant_like(dividend) or _reciprocal(node if isinstance(node, ast.BinOp) else None):
            continue
        rec = _definition(ix, divisor)
        if rec is None:
            continue
        name = ix.segment(divisor)
        defined = "" if rec is divisor else f", which is defined as `{ix.segment(rec)}` (line {rec.lineno})"
        quantity = _inverted(ix, rec)
        yield Hit("divided-by-reciprocal", node,
                  f"`{ix.segment(dividend)}` is divided by `{name}`{defined}: a reciprocal, a factor to multiply by. "
                  f"Dividing by it multiplies by `{quantity}` instead, so the result is scaled by the square of the "
                  "factor away from what the definition says (attention logits divided by head_dim ** -0.5 are "
                  "head_dim times too large and the softmax saturates; a value divided by an inverse standard "
                  "deviation is multiplied by the deviation), with no error",
                  fix=f"multiply by it (`* {name}`), or divide by `{quantity}` itself")
