"""History features derived from the whole series before it is cut at the history's end (one form of OVT527
``window-target-misaligned``, whose rule is :mod:`overt.lint.rules.windows`; issue 33, branch features19, w398).

A forecasting sample splits a series at the end of what is observed: ``s[:k]`` is the history, ``s[k:]`` the
future to predict.  Every input must be a function of the history alone.  A feature computed by an operation that
looks both ways along the series -- ``np.gradient`` (central differences), ``np.diff`` (a forward difference),
a centred smoothing filter -- applied to the *whole* series and then cut with ``[:k]`` gives the last observed steps
values that depend on ``s[k]`` and after: every input carries a piece of the future the model is asked to predict,
and the reported error is lower than a forecaster of the history can reach (StanfordASL/Trajectron-plus-plus#40:
``np.gradient`` over the whole trajectory) -- nothing fails.

Proven from the code, in one function: a call ``g(s, ...)`` of a two-sided operation (:data:`TWO_SIDED`; for
``np.gradient`` with no ``axis`` or ``axis=0``) whose result is sliced ``[:k]`` (directly, or through the name it is
bound to), while the same function takes ``s[k:...]`` or ``s[k]`` -- the future after the same cut ``k``.

Silent: the operation applied to the history (``np.gradient(s[:k])``), causal operations (``np.cumsum``, a moving
average over past values), a cut with no future taken from the same series at the same index, an ``axis`` other
than the one cut.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted

#: operations whose value at a step reads the steps after it
TWO_SIDED = frozenset({"gradient", "diff", "ediff1d", "gaussian_filter1d", "savgol_filter", "filtfilt",
                       "uniform_filter1d", "median_filter", "medfilt"})


def _upper_cut(node: ast.AST) -> ast.AST | None:
    """``k`` of ``X[:k]`` (a slice from the start), else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None \
            and node.slice.upper is not None and node.slice.step is None:
        return node.slice.upper
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and node.slice.elts:
        return _upper_cut(ast.Subscript(value=node.value, slice=node.slice.elts[0], ctx=ast.Load()))
    return None


def _future(node: ast.AST) -> ast.AST | None:
    """``k`` of ``X[k:...]`` or ``X[k]`` (the first axis), else None."""
    if not isinstance(node, ast.Subscript):
        return None
    s = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
    if isinstance(s, ast.Slice):
        return s.lower if s.lower is not None and s.step is None else None
    if isinstance(s, (ast.Name, ast.Attribute, ast.BinOp)):
        return s
    return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _two_sided(node: ast.AST) -> tuple[ast.Call, str] | None:
    """(the call, the series' name) when ``node`` is a two-sided operation along the series' first axis."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    tail = (dotted(node.func) or "").rsplit(".", 1)[-1]
    if tail not in TWO_SIDED:
        return None
    series = dotted(node.args[0])
    if series is None:
        return None
    axis = next((k.value for k in node.keywords if k.arg == "axis"), None)
    if axis is not None and not (isinstance(axis, ast.Constant) and axis.value == 0):
        return None
    if tail == "diff" and any(k.arg == "prepend" for k in node.keywords):
        return None
    return node, series


def future_features(ix: FileIndex) -> Iterator[tuple[ast.Call, str, str]]:
    """(the call, the message, the fix) for each two-sided operation over a whole series, cut afterwards at the
    index where its future begins."""
    for fn in ast.walk(ix.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = ix.scope_nodes(fn)
        bound: dict[str, tuple[ast.Call, str]] = {}
        for n in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                got = _two_sided(n.value)
                if got is not None:
                    bound[n.targets[0].id] = got
        cuts: list[tuple[ast.Call, str, ast.AST, ast.Subscript]] = []
        for n in nodes:
            k = _upper_cut(n)
            if k is None or not isinstance(n, ast.Subscript):
                continue
            got = _two_sided(n.value)
            if got is None and isinstance(n.value, ast.Name):
                got = bound.get(n.value.id)
            if got is not None:
                cuts.append((got[0], got[1], k, n))
        reported: set[int] = set()
        for call, series, k, cut in cuts:
            if id(call) in reported:
                continue
            future = next((n for n in nodes if isinstance(n, ast.Subscript) and dotted(n.value) == series
                           and (f := _future(n)) is not None and _same(f, k)), None)
            if future is None:
                continue
            reported.add(id(call))
            op = dotted(call.func) or "the operation"
            yield call, (
                f"`{ix.segment(call)}` is computed over the whole series `{series}` and cut afterwards "
                f"(`{ix.segment(cut)}`, line {cut.lineno}), while `{ix.segment(future)}` (line {future.lineno}) is "
                f"the future after the same cut: {op} reads the steps on both sides, so the last kept steps depend "
                f"on `{series}[{ix.segment(k)}]` and after, and every input carries part of what the model is asked "
                "to predict (the reported error is lower than a forecaster of the history can reach)"), (
                f"cut the series first and derive the features from the history alone "
                f"(`{ix.segment(call).replace(series, f'{series}[:{ix.segment(k)}]', 1)}`), so that no input reads a "
                "step after the last observed one")
