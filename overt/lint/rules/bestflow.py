"""A running best that already holds the metric when the improvement test reads it, followed through one
call (part of OVT710 ``best-value-not-tracked``, "updated before the test"; issue 33, session 55).

:func:`overt.lint.rules.runningbest._updated_before` sees ``best = min(best, loss)`` written just above
``if loss < best:`` in the same block.  The same constant test is often spread over a trainer's methods
(fastino-ai/GLiNER2#94): an ``evaluate()`` keeps the best (``if metric < self.best: self.best = metric``)
and returns the metric, and the caller then hands both to the patience check
(``check(metric, self.best)``), whose ``if metric < best:`` compares the metric with a best that already
includes it.  This module proves, for an improvement test on a function's parameters (or on names of the
test's own block), that on every path to it the best was last set from that very metric, keeping the
minimum for a ``<`` test (the maximum for ``>``), by one of:

- ``best = metric`` or ``best = min(best, metric)`` (the forms the same-block check knows),
- ``if metric < best: best = metric`` (the conditional form of the same minimum),
- ``metric = obj.method(...)`` where ``method`` (the one method of that name in the file) updates
  ``self.<attr of best>`` from a local name by one of the forms above, at the top level of its body, and
  returns that name unchanged (every ``return`` of the method returns it).

Silent wherever a link is not proved: a function called from several places that do not all prove it, a
parameter re-assigned, a best or metric written between the update and the test, a method found in several
classes, a non-strict test (``<=`` is true on ties, so it is not constant).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overt.lint.index import FileIndex, dotted

_FLAT = (ast.With, ast.AsyncWith)


@dataclass
class Proof:
    """Where the best was set from the metric: the statement, and the method it is in (or None)."""

    stmt: ast.stmt
    method: ast.FunctionDef | ast.AsyncFunctionDef | None


def _keeps(op: ast.cmpop, metric_left: bool) -> str | None:
    """'min' when the branch taken on a true comparison keeps the smaller value as the best, 'max' for the
    larger, None for another operator."""
    lower = isinstance(op, (ast.Lt, ast.LtE))
    if not lower and not isinstance(op, (ast.Gt, ast.GtE)):
        return None
    return ("min" if lower else "max") if metric_left else ("max" if lower else "min")


def _assigns(stmt: ast.stmt, text: str) -> ast.expr | None:
    """The value a plain assignment statement gives ``text`` (a tuple target element included)."""
    if not isinstance(stmt, ast.Assign):
        return None
    for t in stmt.targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            for i, e in enumerate(t.elts):
                if dotted(e) == text:
                    v = stmt.value
                    return v.elts[i] if isinstance(v, (ast.Tuple, ast.List)) and len(v.elts) == len(t.elts) else None
        elif dotted(t) == text:
            return stmt.value
    return None


def _writes(stmt: ast.AST, text: str) -> bool:
    """Does ``stmt`` give ``text`` a value anywhere (any store, an augmented assignment, a ``del``)?"""
    for n in ast.walk(stmt):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)) and dotted(n) == text:
            return True
    return False


def update_kind(stmt: ast.stmt, best: str, metric: str) -> str | None:
    """How ``stmt`` leaves ``best`` given ``metric``: 'same' (``best = metric``), 'min'/'max' (``best =
    min(best, metric)`` or ``if metric < best: best = metric``), or None when it is no such update."""
    value = _assigns(stmt, best)
    if value is not None:
        if dotted(value) == metric:
            return "same"
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("min", "max") \
                and len(value.args) == 2 and not value.keywords \
                and {dotted(a) for a in value.args} == {best, metric}:
            return value.func.id
        return None
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare) or len(stmt.test.ops) != 1:
        return None
    left, right = dotted(stmt.test.left), dotted(stmt.test.comparators[0])
    if {left, right} != {best, metric} or any(_writes(s, best) for s in stmt.orelse):
        return None
    if not any(dotted(_assigns(s, best)) == metric for s in stmt.body) \
            or any(_writes(s, best) and dotted(_assigns(s, best)) != metric for s in stmt.body) \
            or any(_writes(s, metric) for s in stmt.body):
        return None
    return _keeps(stmt.test.ops[0], left == metric)


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of ``body`` run on every path, ``with`` blocks opened."""
    out = []
    for s in body:
        if isinstance(s, _FLAT):
            out.extend(_top_level(s.body))
        else:
            out.append(s)
    return out


def _method_keeps(ix: FileIndex, call: ast.Call, attr: str) -> tuple[str, Proof] | None:
    """``call`` is ``obj.method(...)``: does the method update ``self.<attr>`` from the name it returns?"""
    if not isinstance(call.func, ast.Attribute):
        return None
    name = call.func.attr
    methods = [m for cls in ix.classes.values() for m in cls.body
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name]
    if len(methods) != 1 or len(ix.functions.get(name, [])) != 1:
        return None
    method = methods[0]
    returns = [n for n in ast.walk(method) if isinstance(n, ast.Return)]
    if not returns or any(dotted(r.value) is None or "." in (dotted(r.value) or "") for r in returns):
        return None
    local = dotted(returns[0].value)
    if any(dotted(r.value) != local for r in returns) or method.body[-1] is not returns[-1] or len(returns) != 1:
        return None
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(method)):
        return None
    best = f"self.{attr}"
    stmts = _top_level(method.body)
    for i, s in enumerate(stmts):
        kind = update_kind(s, best, local)
        if kind is None:
            continue
        later = stmts[i + 1:]
        if any(_writes(x, best) or _writes(x, local) for x in later):
            return None
        return kind, Proof(s, method)
    return None


def proved_before(ix: FileIndex, stmt: ast.stmt, best: str, metric: str) -> tuple[str, Proof] | None:
    """Walking back from ``stmt`` through its block: the last statement that sets ``best`` or ``metric``,
    when it is an update of ``best`` from ``metric`` (directly or through a method that returns it)."""
    parent = ix.parents.get(stmt)
    block = next((getattr(parent, f) for f in ("body", "orelse", "finalbody")
                  if isinstance(getattr(parent, f, None), list) and stmt in getattr(parent, f)), None)
    if block is None:
        return None
    for prev in reversed(block[:block.index(stmt)]):
        kind = update_kind(prev, best, metric)
        if kind is not None:
            return kind, Proof(prev, None)
        value = _assigns(prev, metric)
        if value is not None and isinstance(value, ast.Call) and not _writes(prev, best) and "." in best:
            owner, _, attr = best.rpartition(".")
            if isinstance(value.func, ast.Attribute) and dotted(value.func.value) == owner and "." not in attr:
                return _method_keeps(ix, value, attr)
            return None
        if _writes(prev, best) or _writes(prev, metric):
            return None
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and "." in best
               and dotted(n.func.value) == best.rpartition(".")[0] for n in ast.walk(prev)):
            return None  # a method of the best's owner may change it
    return None


def _bound(func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, param: str) -> ast.expr | None:
    """The argument ``call`` gives ``param`` of ``func`` (``self`` skipped for a method called on an object)."""
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        names = names[1:]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    for k in call.keywords:
        if k.arg == param:
            return k.value
    if param in names and names.index(param) < len(call.args):
        return call.args[names.index(param)]
    return None


@dataclass
class Found:
    """A constant improvement test: the update kind, where it was proved, and the call it went through."""

    kind: str
    proof: Proof
    call: ast.Call | None
    best: str
    metric: str


def _whole(node: ast.stmt, cmp: ast.Compare) -> bool:
    """Is ``cmp`` the whole decision of ``node`` (an ``if``'s test, or one conjunct of an ``and``; the value of
    an ``is_best = ...`` assignment)?  Under ``or`` another operand can make the decision true."""
    if isinstance(node, ast.If):
        test = node.test
        return test is cmp or (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
                               and any(v is cmp for v in test.values))
    return isinstance(node, ast.Assign) and node.value is cmp


def constant_test(ix: FileIndex, node: ast.stmt, cmp: ast.Compare, best: ast.expr, metric: ast.expr) -> Found | None:
    """Is the strict test ``cmp`` (the decision of ``node``: an ``if``, or an ``is_best = ...`` assignment) never
    true because the best already holds the metric?"""
    if not _whole(node, cmp):
        return None
    op = cmp.ops[0]
    if not isinstance(op, (ast.Lt, ast.Gt)):
        return None
    b, m = dotted(best), dotted(metric)
    if not b or not m:
        return None
    wants = _keeps(op, cmp.left is metric)  # the side the test asks the metric to beat the best on
    need = {"same", wants}
    found = proved_before(ix, node, b, m)
    if found is not None:
        return Found(found[0], found[1], None, b, m) if found[0] in need else None
    func = ix.enclosing_function(node)
    if func is None or "." in b or "." in m:
        return None
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    if b not in params or m not in params:
        return None
    inside = [s for s in ast.walk(func) if isinstance(s, ast.stmt)]
    if any(_writes(s, b) or _writes(s, m) for s in inside if s is not func):
        return None
    if len(ix.functions.get(func.name, [])) != 1:
        return None  # calls by this name may reach another function of the same name
    sites = ix.call_sites(func)
    if not sites:
        return None
    proofs = []
    for call in sites:
        ba, ma = _bound(func, call, b), _bound(func, call, m)
        if ba is None or ma is None or not dotted(ba) or not dotted(ma):
            return None
        found = proved_before(ix, ix.statement_of(call), dotted(ba), dotted(ma))
        if found is None or found[0] not in need:
            return None
        proofs.append(Found(found[0], found[1], call, dotted(ba) or "", dotted(ma) or ""))
    return proofs[0]
