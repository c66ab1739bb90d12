"""Sliding windows whose target is not where the horizon puts it (OVT527 ``window-target-misaligned``,
issue 33: time-series windows that look ahead or end early).

A forecasting sample is a window of a series and a later value of the same series: with the window
ending at step ``e`` (its last index) and a horizon ``h``, the target is the value at ``e + h``.  Two
index mistakes break it silently.  A target at or before ``e`` (``x = s[i:i+w]``, ``y = s[i+w-1]``)
is one of the inputs: the model learns to copy it.  A window that ends one step early for the
horizon it names (``range(i - horizon - w, i - horizon)`` for the target ``i``: the last input is
``i - horizon - 1``) throws away the latest observation the forecaster is allowed to see and trains a
``horizon + 1``-step forecaster (cmf-team/importance-sampling-2022#53; w95).

Both are read from index arithmetic the file writes: in one loop body, an ``append`` of a ``range(lo,
hi)`` (the window) and an ``append`` of a single index (the target) of the loop's variable; or, in a
``__getitem__``, a slice ``s[lo:hi]`` and an index ``s[t]`` of the same series returned together.
The indices are read as linear expressions of names; the gap ``t - (hi - 1)`` is judged only when it
is a constant at most 0 (the target inside the window), or a name whose words say horizon plus one.
Quiet for anything else (a gap of 2 with no horizon named may be the task), target slices (a
sequence-to-sequence shift), and indices lint cannot read as sums of names and integers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.futurefeats import future_features

Linear = dict[str, int]  # name -> coefficient; "" -> the constant
_HORIZON = frozenset({"horizon", "ahead", "lead", "pred", "forecast", "shift", "offset", "delay", "gap"})


def _linear(node: ast.AST | None) -> Linear | None:
    """``i - self.h - 8`` -> ``{"i": 1, "self.h": -1, "": -8}``; None where it is not a sum of names and ints."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return {"": node.value}
    name = dotted(node) if node is not None else None
    if name:
        return {name: 1}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _linear(node.operand)
        return {k: -v for k, v in inner.items()} if inner is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left, right = _linear(node.left), _linear(node.right)
        if left is None or right is None:
            return None
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(left)
        for k, v in right.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v or k == ""}
    return None


def _minus(a: Linear, b: Linear) -> Linear:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return {k: v for k, v in out.items() if v}


def _judge(gap: Linear) -> tuple[str, str] | None:
    """``(kind, horizon name)`` for a gap that is wrong, or None."""
    const = gap.get("", 0)
    names = {k: v for k, v in gap.items() if k}
    if not names and const <= 0:
        return "inside", ""
    if len(names) == 1 and const == 1:
        (name, coeff), = names.items()
        if coeff == 1 and any(t in _HORIZON for t in tokens(name)):
            return "early", name
    return None


def _range_bounds(node: ast.AST) -> tuple[Linear, Linear] | None:
    if isinstance(node, ast.Call) and dotted(node.func) in ("range", "np.arange", "numpy.arange", "torch.arange") \
            and len(node.args) == 2 and not node.keywords:
        lo, hi = _linear(node.args[0]), _linear(node.args[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None


def _appends(body: list[ast.stmt]) -> list[ast.Call]:
    out = []
    for stmt in body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append" \
                and len(call.args) == 1:
            out.append(call)
    return out


def _loop_pairs(ix: FileIndex) -> Iterator[tuple[ast.AST, Linear, Linear, Linear]]:
    """(where, lo, hi, target) from ``feat.append(range(lo, hi))`` and ``target.append(t)`` in one loop body."""
    for loop in ix.loops:
        if not isinstance(loop, ast.For):
            continue
        var = dotted(loop.target)
        appends = _appends(loop.body)
        windows = [(c, _range_bounds(c.args[0])) for c in appends]
        windows = [(c, b) for c, b in windows if b is not None]
        targets = [(c, _linear(c.args[0])) for c in appends if _range_bounds(c.args[0]) is None]
        targets = [(c, t) for c, t in targets if t is not None and var in t]
        if len(windows) == 1 and len(targets) == 1:
            (wc, (lo, hi)), (_, t) = windows[0], targets[0]
            if var in lo and var in hi:
                yield wc, lo, hi, t


def _getitem_pairs(ix: FileIndex) -> Iterator[tuple[ast.AST, Linear, Linear, Linear]]:
    """(where, lo, hi, target) from ``s[lo:hi]`` and ``s[t]`` of one series in a ``__getitem__``."""
    for fns in ix.functions.values():
        for fn in fns:
            if fn.name != "__getitem__":
                continue
            slices: dict[str, list[tuple[Linear, Linear]]] = {}
            points: dict[str, list[tuple[ast.AST, Linear]]] = {}
            returned = _returned_values(fn)
            for n in ast.walk(fn):
                if not isinstance(n, ast.Subscript) or not isinstance(n.ctx, ast.Load) or id(n) not in returned:
                    continue
                base = dotted(n.value)
                if not base:
                    continue
                if isinstance(n.slice, ast.Slice) and n.slice.step is None:
                    lo, hi = _linear(n.slice.lower), _linear(n.slice.upper)
                    if lo is not None and hi is not None:
                        slices.setdefault(base, []).append((lo, hi))
                elif not isinstance(n.slice, (ast.Slice, ast.Tuple)):
                    t = _linear(n.slice)
                    if t is not None and any(k for k in t):
                        points.setdefault(base, []).append((n, t))
            for base, spans in slices.items():
                if len(spans) == 1 and len(points.get(base, [])) == 1:
                    (lo, hi), (where, t) = spans[0], points[base][0]
                    if set(k for k in t if k) <= set(k for k in lo if k) | set(k for k in hi if k):
                        yield where, lo, hi, t


def _returned_values(fn: ast.AST) -> set[int]:
    """ids of the nodes a ``__getitem__`` returns as the elements of its sample: an element of a returned
    tuple/list (``return x, y``) or the value a returned name was assigned (``x = s[a:b]``)."""
    bound: dict[str, list[ast.AST]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            bound.setdefault(n.targets[0].id, []).append(n.value)
    out: set[int] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and isinstance(n.value, (ast.Tuple, ast.List)):
            for e in n.value.elts:
                for v in bound.get(e.id, []) if isinstance(e, ast.Name) else [e]:
                    out.add(id(v))
    return out


@rule("window-target-misaligned")
def window_target_misaligned(ix: FileIndex) -> Iterator[Hit]:
    for where, lo, hi, t in list(_loop_pairs(ix)) + list(_getitem_pairs(ix)):
        verdict = _judge(_minus(t, _minus(hi, {"": 1})))
        if verdict is None:
            continue
        kind, horizon = verdict
        if kind == "inside":
            yield Hit("window-target-misaligned", where,
                      "the target index lies inside the input window (the window's last index is at or after it): "
                      "the value to forecast is one of the inputs, so the model learns to copy it and every score "
                      "measures the copy",
                      fix="end the window before the target: x = s[i:i + w], y = s[i + w + horizon - 1]")
        else:
            yield Hit("window-target-misaligned", where,
                      f"the window ends {horizon} + 1 steps before its target: its last index is one step earlier "
                      f"than the horizon '{horizon}' allows, so the latest observation the forecaster may see is "
                      f"left out and the model is trained to forecast {horizon} + 1 steps ahead",
                      fix=f"end the window at target - {horizon} (range(t - {horizon} - w + 1, t - {horizon} + 1), "
                          f"or s[t - {horizon} - w + 1:t - {horizon} + 1])")
    for call, message, fix in future_features(ix):
        yield Hit("window-target-misaligned", call, message, fix=fix)


# -- windows-split-at-random -----------------------------------------------------------------------------------
