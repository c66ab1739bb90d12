"""An early stop that compares the latest evaluation with the worst of the window before it (OVT828
``stop-on-window-worst``, issue 33, session 55).

The premise: a patience rule stops a run only when the last ``patience`` evaluations hold no new best, so a
new best anywhere in the window keeps the run going.  A stop test that compares the latest value of a
history with the *worst* of the window before it -- ``history[-1] > max(history[-patience - 1:-1])`` for a
loss, ``< min(...)`` for a score -- fires whenever the latest evaluation is worse than every one in the
window, however much that window improved on the best before it: one noisy evaluation ends a run that is
still improving (allenai/allennlp#426, "Fix patience").  The right rule compares bests:
``min(history[-patience:]) > min(history[:-patience])``.

Reported when, on one history list ``h``:

- one side of an ordering comparison is its latest value ``h[-1]``, the other ``max(h[lo:-1])`` (with ``>``,
  ``>=``) or ``min(h[lo:-1])`` (with ``<``, ``<=``): the extremum on the worse side of the latest value;
- the window holds at least two evaluations (``lo`` a constant, or made from module constants, of at most
  -3), or its bound is made from a name that says patience (a window of one is the plain "stop at the first
  rise" rule, a different and legitimate choice);
- the comparison decides a stop: the test of an ``if`` whose body breaks, returns, raises or sets a stop flag,
  or the returned value of a function whose name says stop, early or patience;
- the history's direction, when its name says one (``val_losses``, ``accs``), matches the extremum: a loss
  history with ``max``, a score history with ``min``.

Silent for anything else: a comparison with the best of the window (``min`` for a loss), a window that
includes the latest value, a window of one, a comparison that saves a model rather than stopping.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.plateau import direction

_STOP_WORDS = frozenset({"stop", "stopping", "early", "patience", "halt", "terminate"})


def _is_last(node: ast.AST) -> str | None:
    """The history in ``h[-1]``, else None."""
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        idx = node.slice
        if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub) and isinstance(idx.operand, ast.Constant) \
                and idx.operand.value == 1:
            return dotted(node.value)
    return None


def _window(node: ast.AST) -> tuple[str, str, ast.expr | None] | None:
    """``(extremum, history, lower bound)`` of ``max(h[lo:-1])``/``min(h[lo:-1])``, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
            and len(node.args) == 1 and not node.keywords):
        return None
    arg = node.args[0]
    if not (isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Slice) and arg.slice.step is None):
        return None
    up = arg.slice.upper
    if not (isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.USub) and isinstance(up.operand, ast.Constant)
            and up.operand.value == 1):
        return None
    h = dotted(arg.value)
    return (node.func.id, h, arg.slice.lower) if h else None


def _value(ix: FileIndex, node: ast.AST, depth: int = 0) -> int | None:
    """An integer expression made of constants and module-level integer constants, else None."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(ix, node.operand, depth + 1)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        a, b = _value(ix, node.left, depth + 1), _value(ix, node.right, depth + 1)
        if a is None or b is None:
            return None
        return a + b if isinstance(node.op, ast.Add) else a - b
    if isinstance(node, ast.Name):
        values = [s.value for s in ix.tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                  and dotted(s.targets[0]) == node.id]
        writes = [n for n in ast.walk(ix.tree) if isinstance(n, ast.Name) and n.id == node.id
                  and isinstance(n.ctx, ast.Store)]
        if len(values) == 1 and len(writes) == 1:
            return _value(ix, values[0], depth + 1)
    return None


def _wide(ix: FileIndex, lower: ast.expr | None) -> bool:
    """Does the window ``h[lower:-1]`` hold at least two values (or is its size named as patience)?"""
    if lower is None:
        return False  # the whole history: the latest against the worst ever is another rule
    v = _value(ix, lower)
    if v is not None:
        return v <= -3
    return any(isinstance(n, (ast.Name, ast.Attribute)) and "patience" in tokens(dotted(n) or "")
               for n in ast.walk(lower))


def _breaks(body: list[ast.stmt]) -> bool:
    for node in (n for s in body for n in ast.walk(s)):
        if isinstance(node, (ast.Break, ast.Return, ast.Raise)):
            return True
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True \
                and any("stop" in (dotted(t) or "").lower() for t in node.targets):
            return True
    return False


def _decides_stop(ix: FileIndex, cmp: ast.Compare) -> bool:
    """Is ``cmp`` the test of an ``if`` that stops, or the value a stop-named function returns?"""
    for a in ix.ancestors(cmp):
        if isinstance(a, ast.If) and any(n is cmp for n in ast.walk(a.test)):
            return _breaks(a.body)
        if isinstance(a, ast.Return):
            func = ix.enclosing_function(a)
            return func is not None and bool(set(tokens(func.name)) & _STOP_WORDS)
        if isinstance(a, ast.stmt):
            return False
    return False


@rule("stop-on-window-worst")
def stop_on_window_worst(ix: FileIndex) -> Iterator[Hit]:
    for cmp in (n for n in ix.kids if isinstance(n, ast.Compare) and len(n.ops) == 1):
        op, left, right = cmp.ops[0], cmp.left, cmp.comparators[0]
        if isinstance(op, (ast.Gt, ast.GtE)):
            pairs = ((left, right, "max"), (right, left, "min"))
        elif isinstance(op, (ast.Lt, ast.LtE)):
            pairs = ((left, right, "min"), (right, left, "max"))
        else:
            continue
        for latest, window, worst in pairs:
            h = _is_last(latest)
            w = _window(window)
            if h is None or w is None or w[1] != h or w[0] != worst:
                continue
            d = direction(h.rsplit(".", 1)[-1])
            if d is not None and d != ("min" if worst == "max" else "max"):
                continue
            if not _wide(ix, w[2]) or not _decides_stop(ix, cmp):
                continue
            kind = "loss" if worst == "max" else "score"
            worse = "higher" if worst == "max" else "lower"
            best = "min" if worst == "max" else "max"
            yield Hit("stop-on-window-worst", cmp,
                      f"`{ix.segment(cmp)}` (line {cmp.lineno}) stops the training when the latest value of `{h}` "
                      f"is {worse} than the worst ({worst}) of the evaluations before it: a new best inside that "
                      f"window does not keep the run going, so one noisy evaluation ends a run that is still "
                      f"improving, and the model kept is from an early epoch; patience means stopping only when the "
                      f"last evaluations hold no new best",
                      fix=f"compare bests, not the latest with the window's worst: for a {kind}, stop when "
                          f"`{best}({h}[-patience:]) {'>=' if worst == 'max' else '<='} {best}({h}[:-patience])` "
                          f"(no evaluation of the last `patience` improved on the best before them)",
                      )
            break
