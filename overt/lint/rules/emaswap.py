"""A moving average of weights whose decay is swapped (OVT124 ``ema-decay-swapped``, the static face).

An EMA of a model keeps most of itself at each update: ``ema = d * ema + (1 - d) * model`` with ``d``
near 1 (a soft target update: ``target = (1 - tau) * target + tau * online`` with ``tau`` near 0).  With
the two weights swapped the average keeps ``1 - d`` of itself and becomes the model of one step ago.

The rule looks at loops over two models' parameters side by side (``for e, p in zip(ema.parameters(),
model.parameters())``, ``named_parameters()``, ``state_dict().values()``) and, inside, at an update of
the loop's first tensor ``e`` from the second ``p``: ``e.mul_(a).add_(p, alpha=b)`` (or ``.add_(b * p)``),
``e.copy_(a * e + b * p)`` and ``e.lerp_(p, w)`` (``a = 1 - w``) forms, where
``e`` may be read through ``.data`` or ``.detach()``.  The weight ``a`` the average keeps of itself is
evaluated from literals and from names assigned one literal in the file or defaulted to one in the
enclosing function's signature (``1 - decay`` included).  It fires when ``a`` is below 0.5: the average
takes most of the model at every update (``a = 0``, a hard copy with ``tau = 1``, is deliberate).  An
update whose weights cannot be evaluated (a parameter without a default, a name assigned twice) is left
alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_PARAM_ITERS = frozenset({"parameters", "named_parameters", "values", "buffers", "state_dict"})


def _base(node: ast.AST) -> str | None:
    """``e`` of ``e``, ``e.data``, ``e.detach()``."""
    while True:
        if isinstance(node, ast.Attribute) and node.attr == "data":
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach" \
                and not node.args:
            node = node.func.value
        else:
            break
    return node.id if isinstance(node, ast.Name) else None


def _default(ix: FileIndex, node: ast.AST, name: str) -> ast.AST | None:
    func = ix.enclosing_function(node)
    if func is None:
        return None
    args = func.args.posonlyargs + func.args.args
    defaults = func.args.defaults
    for a, d in zip(args[len(args) - len(defaults):], defaults):
        if a.arg == name:
            return d
    for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults):
        if a.arg == name and d is not None:
            return d
    return None


def _value(ix: FileIndex, node: ast.AST, depth: int = 0) -> float | None:
    """A number the file pins ``node`` to, or None: literals, arithmetic on them, and names assigned one
    literal (in the enclosing function, else in the file) or defaulted to one in the enclosing signature."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(ix, node.operand, depth + 1)
        return -v if v is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Add, ast.Mult)):
        left, right = _value(ix, node.left, depth + 1), _value(ix, node.right, depth + 1)
        if left is None or right is None:
            return None
        return left - right if isinstance(node.op, ast.Sub) else left + right if isinstance(node.op, ast.Add) \
            else left * right
    name = dotted(node)
    if name is None:
        return None
    if isinstance(node, ast.Name):
        func = ix.enclosing_function(node)
        if func is not None:
            local = [n.value for n in ix.scope_nodes(func) if isinstance(n, (ast.Assign, ast.AugAssign))
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if dotted(t) == name]
            if local:
                return _value(ix, local[0], depth + 1) if len(local) == 1 else None
            d = _default(ix, node, node.id)
            if d is not None:
                return _value(ix, d, depth + 1)
            if any(a.arg == name for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs):
                return None  # a parameter without a default: the caller decides
    values = ix.assigns.get(name, [])
    if len(values) == 1:
        return _value(ix, values[0], depth + 1)
    return None


def _linear(node: ast.AST, sign: float = 1.0, out: list | None = None) -> list[tuple[ast.AST, float, ast.AST | None]]:
    """Terms (tensor expression, sign, coefficient expression or None for 1) of a sum of products."""
    out = [] if out is None else out
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        _linear(node.left, sign, out)
        _linear(node.right, -sign if isinstance(node.op, ast.Sub) else sign, out)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for t, c in ((node.right, node.left), (node.left, node.right)):
            if _base(t) is not None:
                out.append((t, sign, c))
                break
        else:
            out.append((node, sign, None))
    else:
        out.append((node, sign, None))
    return out


def _kept_weight(ix: FileIndex, rhs: ast.AST, e: str, p: str) -> float | None:
    """The weight on ``e`` in ``rhs`` = a * e + b * p, when ``rhs`` is exactly that and ``a`` is pinned."""
    terms = _linear(rhs)
    if len(terms) != 2 or {_base(t) for t, _, _ in terms} != {e, p}:
        return None
    for t, sign, c in terms:
        if _base(t) == e:
            v = 1.0 if c is None else _value(ix, c)
            return None if v is None else sign * v
    return None


def _updates(ix: FileIndex, body: list[ast.stmt], e: str, p: str) -> Iterator[tuple[ast.AST, float]]:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr, owner = node.func.attr, node.func.value
                # e.mul_(a).add_(p, alpha=b) / e.mul_(a).add_(b * p)
                adds_p = bool(node.args) and any(_base(t) == p for t, _, _ in _linear(node.args[0]))
                if attr == "add_" and adds_p and isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) \
                        and owner.func.attr == "mul_" and _base(owner.func.value) == e and len(owner.args) == 1:
                    a = _value(ix, owner.args[0])
                    if a is not None:
                        yield node, a
                elif attr == "lerp_" and _base(owner) == e and len(node.args) == 2 and _base(node.args[0]) == p:
                    w = _value(ix, node.args[1])
                    if w is not None:
                        yield node, 1.0 - w
                elif attr == "copy_" and _base(owner) == e and len(node.args) == 1:
                    a = _kept_weight(ix, node.args[0], e, p)
                    if a is not None:
                        yield node, a


def _pair_loops(ix: FileIndex) -> Iterator[tuple[ast.For, str, str]]:
    """``for e, p in zip(A.parameters(), B.parameters())`` (or named pairs ``(n, e), (_, p)``)."""
    for loop in ix.loops:
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call) or dotted(loop.iter.func) != "zip":
            continue
        if len(loop.iter.args) != 2 or not isinstance(loop.target, ast.Tuple) or len(loop.target.elts) != 2:
            continue
        if not all(isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr in _PARAM_ITERS
                   for a in loop.iter.args):
            continue
        names = []
        for t in loop.target.elts:
            if isinstance(t, ast.Tuple) and len(t.elts) == 2:
                t = t.elts[1]
            names.append(t.id if isinstance(t, ast.Name) else None)
        if all(names) and names[0] != names[1]:
            yield loop, names[0], names[1]


@rule("ema-decay-swapped")
def ema_decay_swapped(ix: FileIndex) -> Iterator[Hit]:
    """``ema_p.mul_(1 - decay).add_(p, alpha=decay)`` with ``decay = 0.999`` (issue 33)."""
    for loop, e, p in _pair_loops(ix):
        for node, kept in _updates(ix, loop.body, e, p):
            if 0 < kept < 0.5:  # 0: a hard copy (tau = 1), on purpose
                yield Hit("ema-decay-swapped", node,
                          f"this update keeps {kept:g} of the average `{e}` and takes {1 - kept:g} of `{p}`: a "
                          "moving average keeps most of itself (decay near 1), so with decay and 1 - decay (or tau "
                          "and 1 - tau) swapped the average is the model of one step ago, with no smoothing and no "
                          "slowly moving target",
                          fix=f"{e}.mul_(decay).add_({p}, alpha=1 - decay) (or {e}.lerp_({p}, 1 - decay)); a soft "
                              "target update is target = (1 - tau) * target + tau * online with a small tau")
