"""A schedule over the step counter that sits at its clamp from the second step on (OVT367
``schedule-clamped-at-once``, issue 33: the values a program builds for its own training, filled wrongly).

The premise: a quantity scheduled on a step counter and clamped to a bound (``max(eps_end, ...)``,
``min(1.0, ...)``: an exploration rate, a warm-up factor, an annealed weight) is written to move over the horizon
the expression names (the ``/ eps_last_frame`` or ``/ warmup_steps`` in it); every correct schedule changes over
more than one step.  An expression that is inside its bound at the counter's first value and pinned to the bound
from the second on never schedules anything: an operator-precedence slip (``start - step + 1 / horizon`` for
``start - (step + 1) / horizon``, Lightning-AI/pytorch-lightning#9620; w157) leaves the agent acting greedily on an
untrained network, or a warm-up finished before it began.

Proven from one file: ``max(bound, expr)`` or ``min(bound, expr)`` (two arguments) where ``expr`` reads one
counter -- a name that a loop of the same scope increments by 1 (``step += 1``) or the variable of ``for step in
range(...)`` -- and divides by a constant of 10 or more (the horizon), and every other name is bound once in the
file to a number (``eps_start, eps_end = 1.0, 0.01``, ``self.eps_end = 0.01``); ``expr`` is evaluated at the
counter's values 0, 1, 2 and 3: inside the bound at 0 and beyond it at 1, 2 and 3 (while the horizon is longer than
3 steps).  A name bound twice, a call in ``expr``, a counter not found: silent.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _number(node.operand)
        return None if v is None else -v
    return None


def _constants(ix: FileIndex) -> dict[str, float]:
    """Dotted names bound exactly once in the file, to a number (tuple assignments element by element)."""
    seen: dict[str, list[float | None]] = {}
    for node in ix.kids:
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            name = dotted(node.target)
            if name:
                value = _number(node.value) if isinstance(node, ast.AnnAssign) and node.value else None
                seen.setdefault(name, []).append(value)
            continue
        if isinstance(node, (ast.For, ast.comprehension, ast.With, ast.arg)):
            targets = [getattr(node, "target", None) or getattr(node, "optional_vars", None)]
            if isinstance(node, ast.arg):
                seen.setdefault(node.arg, []).append(None)
                continue
            if isinstance(node, ast.With):
                targets = [i.optional_vars for i in node.items]
            for t in targets:
                for n in ast.walk(t) if t is not None else ():
                    if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n):
                        seen.setdefault(dotted(n), []).append(None)
            continue
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(node.value.elts):
                pairs = list(zip(target.elts, node.value.elts))
            else:
                pairs = [(target, node.value)]
            for t, v in pairs:
                for n in ast.walk(t):
                    if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n):
                        seen.setdefault(dotted(n), []).append(_number(v) if n is t else None)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None}


def _counters(ix: FileIndex) -> set[str]:
    """Names a loop increments by one, or that ``for x in range(...)`` binds."""
    out = set()
    for node in ix.kids:
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and _number(node.value) == 1.0 \
                and ix.enclosing_loops(node) and dotted(node.target):
            out.add(dotted(node.target))
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call) \
                and dotted(node.iter.func) == "range":
            out.add(node.target.id)
    return out


def _evaluate(node: ast.AST, env: dict[str, float]) -> float | None:
    n = _number(node)
    if n is not None:
        return n
    if isinstance(node, (ast.Name, ast.Attribute)):
        return env.get(dotted(node) or "")
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _evaluate(node.left, env), _evaluate(node.right, env)
        if a is None or b is None:
            return None
        try:
            return float(_OPS[type(node.op)](a, b))
        except (ZeroDivisionError, OverflowError, ValueError, TypeError):
            return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _evaluate(node.operand, env)
        return None if v is None else -v
    return None


def _horizon(expr: ast.AST, env: dict[str, float]) -> float | None:
    """The largest constant ``expr`` divides by, when 10 or more."""
    best = None
    for n in ast.walk(expr):
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
            d = _evaluate(n.right, env)
            if d is not None and d >= 10 and (best is None or d > best):
                best = d
    return best


@rule("schedule-clamped-at-once")
def schedule_clamped_at_once(ix: FileIndex) -> Iterator[Hit]:
    clamps = [c for c in ix.calls if isinstance(c.func, ast.Name) and c.func.id in ("max", "min")
              and len(c.args) == 2 and not c.keywords]
    if not clamps:
        return
    counters = _counters(ix)
    if not counters:
        return
    consts = None
    for call in clamps:
        for bound_node, expr in ((call.args[0], call.args[1]), (call.args[1], call.args[0])):
            if any(isinstance(n, ast.Call) for n in ast.walk(expr)):
                continue
            names = {dotted(n) for n in ast.walk(expr) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)}
            used = names & counters
            if len(used) != 1:
                continue
            counter = used.pop()
            if consts is None:
                consts = _constants(ix)
            env = {k: v for k, v in consts.items() if k != counter}
            bound = _evaluate(bound_node, env)
            horizon = _horizon(expr, env)
            if bound is None or horizon is None:
                continue
            values = [_evaluate(expr, {**env, counter: float(k)}) for k in range(4)]
            if any(v is None for v in values):
                continue
            beyond = (lambda v: v < bound) if call.func.id == "max" else (lambda v: v > bound)
            if beyond(values[0]) or not all(beyond(v) for v in values[1:]):
                continue
            divided = any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv))
                          and counter in {dotted(m) for m in ast.walk(n)} for n in ast.walk(expr))
            why = ("" if divided else f". Python reads `{ix.segment(expr)}` with the division before the subtraction "
                   f"and the addition, so the horizon never divides `{counter}`")
            yield Hit("schedule-clamped-at-once", call,
                      f"`{ix.segment(call)}` schedules on `{counter}` over a horizon of {horizon:g} steps, but the "
                      f"expression is {values[0]:.4g} at {counter} = 0 and {values[1]:.4g} at {counter} = 1, past the "
                      f"bound {bound:g}: from the second step on the value is pinned to its bound, so the schedule "
                      f"never runs (an exploration rate at its floor from the start, a warm-up that is over before "
                      f"it began){why}",
                      fix="parenthesise the counter's term so the horizon divides it, e.g. "
                          "start - (step + 1) / horizon, or start - step * (start - end) / horizon")
            break
