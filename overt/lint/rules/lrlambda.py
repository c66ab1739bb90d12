"""A ``LambdaLR``/``MultiplicativeLR`` function that returns the learning rate instead of a factor
(OVT122 ``lr-lambda-returns-rate``, issue 33, round three's w79).

The scheduler multiplies the optimizer's ``lr`` by what the function returns.  The rule fires when
every value the function returns (a ``lambda``'s body, or each ``return`` of a ``def`` of the same
file passed by name) is a product one of whose factors is the very expression given as ``lr=`` to
the optimizer the scheduler is built on (the same name, attribute chain or number, found in the
same file): the rate is then applied twice.  Silent when a name is assigned more than once in
the file or is a parameter of the function itself, when the optimizer or the function is not found,
when the optimizer is a parameter of the enclosing function, and when its parameters are not provably
plain tensors or groups without their own ``"lr"`` (the Transfer-Learning-Library's
``SGD(model.get_parameters(), args.lr)`` gives groups rates of 0.1 and 1.0, so there ``args.lr *``
in the function is the rate and correct).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_KINDS = ("LambdaLR", "MultiplicativeLR")


def _factors(expr: ast.expr) -> list[ast.expr]:
    """The operands of a chain of ``*`` (``a * b * c`` -> ``[a, b, c]``); ``[expr]`` otherwise."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return _factors(expr.left) + _factors(expr.right)
    return [expr]


def _returned(ix: FileIndex, fn: ast.expr) -> tuple[list[ast.expr], set[str]] | None:
    """What the scheduler's function returns, and its parameter names; None when unknown."""
    if isinstance(fn, ast.Lambda):
        return [fn.body], {a.arg for a in fn.args.args}
    if isinstance(fn, ast.Name):
        defs = ix.functions.get(fn.id, [])
        if len(defs) != 1 or not isinstance(defs[0], ast.FunctionDef):
            return None
        d = defs[0]
        rets = [n.value for n in ast.walk(d) if isinstance(n, ast.Return)]
        if not rets or any(r is None for r in rets):
            return None
        return [r for r in rets if r is not None], {a.arg for a in d.args.args}
    return None


def _scoped_values(ix: FileIndex, at: ast.AST, name: str) -> list[ast.expr]:
    """The values assigned to ``name`` in the function around ``at`` (or at module level, outside any
    function or class)."""
    scope: ast.AST = ix.enclosing_function(at) or ix.tree
    out: list[ast.expr] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets):
            out.append(node.value)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _optimizer_lr(ix: FileIndex, opt: ast.expr) -> ast.expr | None:
    """The ``lr=`` given to the optimizer ``opt`` names (every assignment of it in its scope agrees), else None."""
    calls: list[ast.expr] = [opt] if isinstance(opt, ast.Call) else _scoped_values(ix, opt, dotted(opt) or "")
    lrs = []
    for call in calls:
        if not isinstance(call, ast.Call):
            return None
        q = ix.qualname(call.func) or ""
        if ".optim." not in f".{q}." or not ix.is_torchish(q):
            return None
        if not call.args or not _plain_params(ix, call.args[0], 0):
            return None  # groups that may carry their own "lr": the optimizer's lr= is only their default
        lr = kwarg(call, "lr")
        if lr is None and len(call.args) >= 2:
            lr = call.args[1]
        if lr is None:
            return None
        lrs.append(lr)
    if not lrs or len({ast.dump(v) for v in lrs}) != 1:
        return None
    return lrs[0]


def _plain_params(ix: FileIndex, expr: ast.expr, depth: int) -> bool:
    """Whether ``expr`` provably gives the optimizer tensors (``model.parameters()``, a filter or list of
    them) or groups without an ``"lr"`` key, so that every group trains at the optimizer's ``lr=``."""
    if depth > 3:
        return False
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "parameters":
            return True
        name = dotted(expr.func) or ""
        return name in ("filter", "list", "itertools.chain", "chain") and any(
            _plain_params(ix, a, depth + 1) for a in expr.args)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        return not isinstance(expr.elt, ast.Dict) and all(_plain_params(ix, g.iter, depth + 1)
                                                          for g in expr.generators)
    if isinstance(expr, (ast.List, ast.Tuple)) and expr.elts:
        return all(isinstance(d, ast.Dict) and None not in d.keys
                   and all(isinstance(k, ast.Constant) and k.value != "lr" for k in d.keys) for d in expr.elts)
    if isinstance(expr, ast.Name):
        values = _scoped_values(ix, expr, expr.id)
        return len(values) == 1 and _plain_params(ix, values[0], depth + 1)
    return False


def _same_rate(ix: FileIndex, lr: ast.expr, factor: ast.expr, params: set[str]) -> bool:
    """Whether ``factor`` is provably the value passed as ``lr``."""
    if isinstance(lr, ast.Constant):
        return (isinstance(lr.value, float) and 0 < lr.value < 0.5 and isinstance(factor, ast.Constant)
                and factor.value == lr.value)
    name = dotted(lr)
    if name is None or dotted(factor) != name or name.split(".")[0] in params:
        return False
    return len(ix.assigns.get(name, [])) <= 1


def _is_parameter(ix: FileIndex, call: ast.Call, opt: ast.expr) -> bool:
    """Whether ``opt`` is a parameter of a function around ``call``: another binding than the file's
    assignments, whatever optimizer the caller passes."""
    name = dotted(opt)
    for node in ix.ancestors(call):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            if name in {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}:
                return True
    return False


@rule("lr-lambda-returns-rate")
def lr_lambda_returns_rate(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        if not ix.call_is(call, *_KINDS) or not call.args:
            continue
        fn = kwarg(call, "lr_lambda") or (call.args[1] if len(call.args) >= 2 else None)
        opt = kwarg(call, "optimizer") or call.args[0]
        got = _returned(ix, fn) if fn is not None else None
        lr = None if _is_parameter(ix, call, opt) else _optimizer_lr(ix, opt)
        if got is None or lr is None:
            continue
        returns, params = got
        if not all(any(_same_rate(ix, lr, f, params) for f in _factors(r)) for r in returns):
            continue
        kind = (ix.qualname(call.func) or "").rsplit(".", 1)[-1]
        rate = ix.segment(lr)
        yield Hit("lr-lambda-returns-rate", fn,
                  f"the function given to {kind} multiplies by `{rate}`, the learning rate already given to the "
                  f"optimizer (`lr={rate}`): {kind} multiplies the optimizer's rate by the function's value, so "
                  f"the rate is applied twice and training runs at {rate} x {rate}",
                  fix=f"return the factor alone (drop `{rate} *`), e.g. lambda it: (1 - it / max_iter) ** 0.9")
