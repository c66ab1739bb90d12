"""An early-stopping patience counter that an improvement never resets (OVT707 ``patience-never-reset``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_SCOPES = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)


def _walk(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes under ``nodes``, not entering nested definitions."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(child)


def _assigned(nodes: list[ast.stmt]) -> set[str]:
    """Names and attributes given a value (a plain assignment) under ``nodes``."""
    out = set()
    for node in _walk(nodes):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for e in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                    if dotted(e):
                        out.add(dotted(e))
    return out


def _incremented(nodes: list[ast.stmt]) -> list[ast.AugAssign]:
    return [n for n in _walk(nodes) if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add)
            and isinstance(n.value, ast.Constant) and n.value.value == 1 and dotted(n.target)]


def _reads(expr: ast.AST) -> set[str]:
    return {dotted(n) for n in ast.walk(expr) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)}


def _stops(ix: FileIndex, scope: ast.AST, counter: str) -> ast.AST | None:
    """A test of ``counter`` against a threshold that ends the training: a loop condition, an ``if`` whose body
    breaks, returns, raises or sets a stop flag, or a returned comparison."""
    if isinstance(scope, ast.While) and counter in _reads(scope.test):
        return scope.test
    for node in _walk(scope.body):
        if isinstance(node, ast.If) and isinstance(node.test, (ast.Compare, ast.BoolOp)) \
                and counter in _reads(node.test):
            for inner in _walk(node.body):
                if isinstance(inner, (ast.Break, ast.Return, ast.Raise)):
                    return node.test
                if isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Constant) \
                        and inner.value.value is True and any("stop" in (dotted(t) or "").lower()
                                                              for t in inner.targets):
                    return node.test
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Compare) and counter in _reads(node.value):
            return node.value
    return None


def _reset_anywhere(ix: FileIndex, scope: ast.AST, counter: str) -> bool:
    """Is ``counter`` given a value in ``scope``, or (``self.x``) in a method of the class that ``scope``
    calls on ``self``?"""
    if counter in _assigned(scope.body):
        return True
    if not counter.startswith("self."):
        return False
    func = scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else ix.enclosing_function(scope)
    cls = ix.enclosing_class(func) if func is not None else None
    if cls is None:
        return True  # `self` of something this file does not show
    called = {n.func.attr for n in _walk(scope.body) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self"}
    return any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name in called
               and counter in _assigned(m.body) for m in cls.body)


_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _best_values(test: ast.AST, better: list[ast.stmt]) -> list[str]:
    """The best values an improvement test keeps: an ordering comparison of a metric with ``best`` (``loss <
    best``, ``score > self.best + delta``) whose branch ``better`` sets ``best`` from that metric."""
    sets: dict[str, set[str]] = {}
    for node in _walk(better):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for e in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                    value = node.value.elts[t.elts.index(e)] if isinstance(t, ast.Tuple) and isinstance(
                        node.value, ast.Tuple) and len(node.value.elts) == len(t.elts) else node.value
                    if dotted(e):
                        sets.setdefault(dotted(e), set()).update(_reads(value))
    out = []
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare) and len(n.ops) == 1
                and isinstance(n.ops[0], _ORDER)):
        left, right = _reads(cmp.left), _reads(cmp.comparators[0])
        for best, sources in sets.items():
            if (best in right and sources & (left - {best})) or (best in left and sources & (right - {best})):
                out.append(best)
    return sorted(set(out))


@rule("patience-never-reset")
def patience_never_reset(ix: FileIndex) -> Iterator[Hit]:
    seen: set[str] = set()
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.If) and node.orelse):
            continue
        read = _reads(node.test)
        for better, worse in ((node.body, node.orelse), (node.orelse, node.body)):
            best = _best_values(node.test, better)
            if not best:
                continue  # not an improvement test: no best value kept
            for inc in _incremented(worse):
                counter = dotted(inc.target) or ""
                if counter in read or counter in seen:
                    continue
                scope = next((a for a in ix.ancestors(node) if isinstance(a, _SCOPES)), None)
                if scope is None:
                    continue
                stop = _stops(ix, scope, counter)
                if stop is None or _reset_anywhere(ix, scope, counter):
                    continue
                seen.add(counter)
                yield Hit("patience-never-reset", inc,
                          f"`{counter}` counts the evaluations without improvement (line {inc.lineno}) and stops "
                          f"the training at `{ix.segment(stop)}` (line {stop.lineno}), but nothing sets it back "
                          f"when `{best[0]}` improves (line {node.lineno}): it counts every non-improving "
                          f"evaluation since the start, not the consecutive ones, so a run that is still improving "
                          f"stops after a few noisy evaluations in all",
                          fix=f"reset it where the best value is updated: `{counter} = 0`")
