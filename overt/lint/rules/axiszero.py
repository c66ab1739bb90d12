"""An optional axis tested for truth (OVT426 ``axis-zero-as-none``, issue 33).

A parameter that is an axis or ``None`` (``def normalize(x, axis=None)``) and is then tested for truth
(``if axis:``, ``if not dim:``, ``dim or -1``, ``a if axis else b``) takes ``0``, the first axis, for
``None``: ``normalize(x, axis=0)`` normalises by the global peak instead of each column's, a reduction over
the batch axis is skipped, and nothing fails (audtorch#28; w165).

Reported on the truth test when the parameter (of a function, or an ``__init__`` parameter kept as
``self.X`` and tested in another method of the class)

- defaults to ``None`` (or is annotated ``Optional``/``| None``): it is optional, so ``None`` is the
  "no axis" the test means, and
- is used as an axis in the same function (or class): passed as ``dim=``/``axis=`` to a torch or numpy
  function or class or to a tensor method that takes an axis, as ``axis=`` to any call, or as the axis
  argument by position (``x.sum(dim)``, ``x.softmax(axis)``, ``torch.cat(xs, dim)``), and
- reaches the test unchanged (every reaching definition is the parameter itself).

Quiet when the test also compares the parameter (``if dim is not None and dim:``, ``axis or axis == 0``),
when the parameter is rebound first, and for parameters never used as an axis (a boolean flag, a size
such as ``head_dim or embed_dim // heads`` or ``Block(dim=dim_out)``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, FuncNode
from overt.lint.rules.base import Hit, rule

SLUG = "axis-zero-as-none"
AXIS_KEYWORDS = ("dim", "axis", "dims", "axes")
#: tensor methods (and torch/numpy functions, after the tensor) whose first positional argument is an axis
AXIS_METHODS = frozenset((
    "sum", "mean", "amax", "amin", "max", "min", "std", "var", "softmax", "log_softmax", "argmax", "argmin",
    "cumsum", "cumprod", "logsumexp", "prod", "size", "unsqueeze", "squeeze", "any", "all", "median", "nansum",
    "nanmean", "count_nonzero", "unbind", "cat", "stack", "concatenate", "expand_dims", "nanmax", "nanmin"))
ARRAY_HEADS = ("torch", "np", "numpy", "F", "jnp")


def _optional(arg: ast.arg, default: ast.expr | None) -> bool:
    if isinstance(default, ast.Constant) and default.value is None:
        return True
    ann = arg.annotation
    if ann is None:
        return False
    text = ast.unparse(ann)
    return "Optional" in text or "None" in text


def _params(func: FuncNode) -> dict[str, ast.arg]:
    """The function's optional parameters (``None`` default or an ``Optional`` annotation)."""
    a = func.args
    pos = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    pairs = list(zip(pos, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
    return {arg.arg: arg for arg, d in pairs if _optional(arg, d)}


def _key(node: ast.AST) -> str | None:
    """``name`` for a local name, ``self.name`` for an attribute of ``self``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _axis_uses(ix: FileIndex, nodes: list[ast.AST]) -> set[str]:
    """Names and ``self.X`` attributes used as an axis among ``nodes``: the ``dim=``/``axis=`` of a torch or numpy
    function or class (``F.normalize(x, dim=d)``, ``nn.Softmax(dim=d)``) or of a tensor method that takes an axis
    (``x.amax(dim=d)``), or such a method's axis given by position (``x.sum(d)``, ``torch.sum(x, d)``), or the
    ``axis=`` of any call.  The ``dim=`` of the file's own functions and classes is not counted: there ``dim`` is
    often a size (``Block(dim=dim_out)``)."""
    out: set[str] = set()
    for n in nodes:
        if not isinstance(n, ast.Call):
            continue
        q = ix.qualname(n.func) or ""
        head = q.split(".")[0]
        array_call = "." in q and head in ARRAY_HEADS and (head != "F" or ix.is_torchish(q)) \
            or head == "nn" and ix.is_torchish(q)
        method = isinstance(n.func, ast.Attribute) and n.func.attr in AXIS_METHODS
        for kw in n.keywords:
            # `axis=` names an axis in any call; `dim=` only in torch's and numpy's (a user's dim is often a size)
            if kw.arg in ("axis", "axes") or kw.arg in AXIS_KEYWORDS and (array_call or method):
                out.update(_candidates(kw.value))
        if not (array_call or method):
            continue
        if method and n.args:
            # a tensor method (x.sum(dim)) takes the axis first; a module function (torch.sum(x, dim)) second
            slot = 1 if array_call else 0
            if len(n.args) > slot:
                out.update(_candidates(n.args[slot]))
    return out


def _candidates(value: ast.expr) -> set[str]:
    """Names a value passed as an axis may be: ``dim``, ``dim or -1``, ``axis if axis else -1``."""
    if isinstance(value, ast.BoolOp):
        return set().union(*(_candidates(v) for v in value.values))
    if isinstance(value, ast.IfExp):
        return _candidates(value.body) | _candidates(value.orelse)
    key = _key(value)
    return {key} if key else set()


def _truth_tests(ix: FileIndex, nodes: list[ast.AST]) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    """(operand, the whole test, form) for each operand that is tested for truth."""
    for n in nodes:
        if isinstance(n, (ast.If, ast.While, ast.IfExp)):
            yield from _operands(n.test, n.test, "if")
        elif isinstance(n, ast.BoolOp) and not _in_test(ix, n):
            # `dim or -1`: the operands before the last are tested for truth
            for v in n.values[:-1]:
                yield from _operands(v, n, "or" if isinstance(n.op, ast.Or) else "and")
        elif isinstance(n, ast.comprehension):
            for cond in n.ifs:
                yield from _operands(cond, cond, "if")


def _in_test(ix: FileIndex, node: ast.AST) -> bool:
    """Is ``node`` (part of) the test of an if/while/conditional expression (handled there)?"""
    child = node
    for anc in ix.ancestors(node):
        if isinstance(anc, (ast.If, ast.While, ast.IfExp)):
            return anc.test is child
        if not isinstance(anc, (ast.BoolOp, ast.UnaryOp)):
            return False
        child = anc
    return False


def _operands(expr: ast.expr, whole: ast.expr, form: str) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        yield from _operands(expr.operand, whole, "if not" if form == "if" else form)
    elif isinstance(expr, ast.BoolOp):
        for v in expr.values:
            yield from _operands(v, whole, form)
    elif _key(expr):
        yield expr, whole, form


def _compared(whole: ast.expr, key: str) -> bool:
    """Does the test also compare the parameter (``dim is not None and dim``, ``axis or axis == 0``)?"""
    for n in ast.walk(whole):
        if isinstance(n, ast.Compare) and any(_key(x) == key for x in [n.left, *n.comparators]):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance" \
                and n.args and _key(n.args[0]) == key:
            return True
    return False


def _hit(ix: FileIndex, operand: ast.AST, whole: ast.expr, form: str, param: str, where: str) -> Hit:
    text = ix.segment(operand)
    if form in ("or", "and"):
        shown = ix.segment(whole).replace("\n", " ")
        fix = f"test `{text} is None` instead of its truth (e.g. `default if {text} is None else {text}`)"
        what = f"`{shown}`"
    else:
        fix = f"`{'if ' + text + ' is None' if form == 'if not' else 'if ' + text + ' is not None'}`"
        what = f"`{form} {text}`"
    return Hit(SLUG, operand,
               f"{what} tests the optional axis `{param}`{where} for truth: axis 0 is falsy, so a call with "
               f"{param}=0 takes the branch meant for None (a per-axis reduction or normalisation becomes global, "
               "or the one over the first axis is skipped)",
               fix=f"compare with None: {fix}")


def _function_hits(ix: FileIndex, func: FuncNode) -> Iterator[Hit]:
    params = _params(func)
    if not params:
        return
    va = values_for(ix)
    nodes = ix.scope_nodes(func)
    uses = _axis_uses(ix, nodes)
    for operand, whole, form in _truth_tests(ix, nodes):
        if not isinstance(operand, ast.Name) or operand.id not in params:
            continue
        name = operand.id
        if name not in uses:
            continue
        defs = va.defs(operand)
        if not defs or any(d.kind != "param" for d in defs) or _compared(whole, name):
            continue
        yield _hit(ix, operand, whole, form, name, _zero_call(ix, func, name))


def _zero_call(ix: FileIndex, func: FuncNode, name: str) -> str:
    """Where the file calls ``func`` with 0 for ``name`` (`` (normalize(x, axis=0) at line 33 does)``), else ""."""
    a = func.args
    pos = [x.arg for x in [*a.posonlyargs, *a.args]]
    if pos and pos[0] in ("self", "cls"):
        pos = pos[1:]
    for call in ix.call_sites(func):
        given = next((k.value for k in call.keywords if k.arg == name), None)
        if given is None and name in pos and len(call.args) > pos.index(name):
            given = call.args[pos.index(name)]
        if isinstance(given, ast.Constant) and given.value == 0 and given.value is not False:
            return f" ({' '.join(ix.segment(call).split())[:60]} at line {call.lineno} passes 0)"
    return ""


def _class_hits(ix: FileIndex, cls: ast.ClassDef) -> Iterator[Hit]:
    """``__init__(self, dim=None)`` kept as ``self.dim`` and tested for truth in another method."""
    init = next((f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.name == "__init__"), None)
    if init is None:
        return
    params = _params(init)
    kept: dict[str, str] = {}  # self.X -> the parameter it keeps
    assigned: dict[str, int] = {}
    for n in ast.walk(cls):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                key = _key(t)
                if key and key.startswith("self."):
                    assigned[key] = assigned.get(key, 0) + 1
                    if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in params \
                            and any(a is init for a in ix.ancestors(n)):
                        kept[key] = n.value.id
    kept = {k: p for k, p in kept.items() if assigned.get(k) == 1}
    if not kept:
        return
    methods = [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    uses: set[str] = set()
    for m in methods:
        uses |= _axis_uses(ix, ix.scope_nodes(m))
    for m in methods:
        if m is init:
            continue
        for operand, whole, form in _truth_tests(ix, ix.scope_nodes(m)):
            key = _key(operand)
            if key not in kept:
                continue
            param = kept[key]
            if key not in uses or _compared(whole, key):
                continue
            yield _hit(ix, operand, whole, form, key, f" (`{param}=None` of {cls.name}.__init__)")


@rule(SLUG)
def axis_zero_as_none(ix: FileIndex) -> Iterator[Hit]:
    for funcs in ix.functions.values():
        for func in funcs:
            yield from _function_hits(ix, func)
    for cls in ix.classes.values():
        yield from _class_hits(ix, cls)
