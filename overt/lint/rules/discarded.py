"""A new value computed from a function's own tensor and thrown away (OVT451 ``result-discarded``, issue 33).

The invariant: every statement of a correct function has an effect.  An expression statement whose value is a new
object computed by a pure operation -- arithmetic (``x + pe``, ``x * scale``, ``h @ w``) or a call of a
side-effect-free tensor function or method (``F.relu(x)``, ``torch.sigmoid(x)``, ``x.add(y)``, ``x.view(...)``
on a name known to hold a tensor)
-- and is not bound to any name does nothing: the function goes on with the old value.  In a model's forward that
silently removes the step the line was written for (Lightning-AI/pytorch-lightning#19138: a ``PositionalEncoding``
whose ``forward`` evaluates ``x + self.pe[:x.size(0)]`` and returns ``x``: no position reaches the model; the wild
corpus's w367).

Proven from the code: an expression statement inside a function (not at module level, where a notebook cell's last
line displays its value), whose value is such an operation (arithmetic operators only, no comparison; calls only
of the listed pure functions and methods, never with ``out=`` or ``inplace=True``, never a trailing-underscore
in-place method, never a method of a model), one of whose operands is a plain name of the function's own (a
parameter or a local it assigned) that a later statement of the same function reads (``return x``): the value the
line meant to replace goes on unchanged.  Silent in test files, inside a ``try`` body or a ``with pytest.raises``-like
block (an expression evaluated for the error it raises), in functions named for timing or warming up (``bench``,
``warmup``, ``profile``, ``timeit``), and where either operand is a string or a number only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.units import tensor_names
from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, is_const, kwarg, tokens
from overt.lint.rules.base import Hit, rule

_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv, ast.Mod)
_PURE = frozenset({
    "relu", "gelu", "silu", "elu", "leaky_relu", "sigmoid", "tanh", "softmax", "log_softmax", "softplus", "mish",
    "add", "sub", "mul", "div", "matmul", "mm", "bmm", "pow", "exp", "log", "sqrt", "rsqrt", "abs", "neg",
    "clamp", "clip", "normalize", "layer_norm", "dropout", "linear", "pad", "where", "cat", "stack", "einsum",
    "view", "reshape", "permute", "transpose", "flatten", "unsqueeze", "squeeze", "contiguous", "expand",
    "repeat", "masked_fill", "roll", "flip", "detach", "clone", "sin", "cos"})
_MODULE_METHODS = frozenset({"float", "double", "half", "cuda", "cpu", "to", "train", "eval", "apply"})
_RAISES = frozenset({"raises", "assertRaises", "assertRaisesRegex", "suppress", "warns", "assertWarns"})
_QUIET_WORDS = frozenset({"bench", "benchmark", "warmup", "warm", "profile", "profiling", "timeit", "timing",
                          "speed", "test", "check"})


def _pure(ix: FileIndex, node: ast.AST) -> list[ast.AST] | None:
    """The operands of a pure operation ``node``, or None when it may have an effect."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return [node.operand]
    if not isinstance(node, ast.Call) or kwarg(node, "out") is not None or is_const(kwarg(node, "inplace"), True):
        return None
    f = node.func
    if not isinstance(f, ast.Attribute) or f.attr not in _PURE:
        return None
    base = dotted(f.value)
    if base in ("torch", "F", "torch.nn.functional", "nn.functional"):
        return list(node.args)
    if isinstance(f.value, ast.Name) and not ix.is_model(f.value.id) and (
            values_for(ix).of(f.value).tensor
            or f.value.id in tensor_names(ix) and not _bound_otherwise(ix, node, f.value.id)):
        return [f.value, *node.args]  # x.add(y), x.view(n, -1) on a name known to hold a tensor (a set's add is not)
    return None


_CONTAINERS = (ast.Set, ast.List, ast.Dict, ast.Tuple, ast.SetComp, ast.ListComp, ast.DictComp)
_CONTAINER_CALLS = frozenset({"set", "list", "dict", "tuple", "frozenset", "deque", "defaultdict", "Counter",
                              "OrderedDict"})


def _bound_otherwise(ix: FileIndex, node: ast.AST, name: str) -> bool:
    """Whether the function around ``node`` binds ``name`` itself in a way that proves no tensor (a Python
    container, ``names = set()``; a loop target, ``for _, names in pairs``): a name that holds a tensor elsewhere
    in the file is then not known to hold one here, and a set's ``add`` changes it in place."""
    scope = ix.enclosing_function(node)
    if scope is None:
        return False
    for n in ast.walk(scope):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
            return True
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            v = n.value
            if isinstance(v, _CONTAINERS) or isinstance(v, ast.Call) and isinstance(v.func, ast.Name) \
                    and v.func.id in _CONTAINER_CALLS:
                return True
    return False


def _own_names(func: ast.AST) -> set[str]:
    """The function's parameters and the plain names it assigns."""
    a = func.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)} | {p.arg for p in (a.vararg, a.kwarg) if p}
    for n in ast.walk(func):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
    return names - {"self", "cls"}


def _read_after(ix: FileIndex, func: ast.AST, stmt: ast.stmt, name: str) -> ast.Name | None:
    for n in ast.walk(func):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and n.lineno > stmt.end_lineno:
            return n
    return None


def _inside_try_or_with(ix: FileIndex, stmt: ast.stmt, func: ast.AST) -> bool:
    for a in ix.ancestors(stmt):
        if a is func:
            return False
        if isinstance(a, ast.Try):
            return True
        if isinstance(a, (ast.With, ast.AsyncWith)) and any(
                (dotted(i.context_expr.func if isinstance(i.context_expr, ast.Call) else i.context_expr) or ""
                 ).rsplit(".", 1)[-1] in _RAISES for i in a.items):
            return True
    return False


@rule("result-discarded", fixable=False)
def result_discarded(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file:
        return
    for stmt in ast.walk(ix.tree):
        if not isinstance(stmt, ast.Expr):
            continue
        operands = _pure(ix, stmt.value)
        if not operands or any(isinstance(o, ast.JoinedStr) or isinstance(o, ast.Constant) and isinstance(
                o.value, (str, bytes)) for o in operands):
            continue
        func = ix.enclosing_function(stmt)
        if func is None or isinstance(func, ast.Lambda):
            continue
        if set(tokens(func.name)) & _QUIET_WORDS:
            continue
        if _inside_try_or_with(ix, stmt, func):
            continue
        own = _own_names(func)
        kept = None
        for o in operands:
            if isinstance(o, ast.Name) and o.id in own:
                later = _read_after(ix, func, stmt, o.id)
                if later is not None:
                    kept = (o.id, later)
                    break
        if kept is None:
            continue
        name, later = kept
        text = ix.segment(stmt.value)
        yield Hit("result-discarded", stmt.value,
                  f"`{text}` computes a new value and throws it away: it is a statement, bound to no name, and "
                  f"the operation changes nothing in place, so `{name}` is unchanged when line {later.lineno} reads "
                  f"it. Whatever the line was written to do in {func.name}() (add a term, apply an activation, "
                  "reshape) never happens, and training runs on without it",
                  fix=f"assign the result to the name the next lines read (`{name} = {text}`), or delete the line")
