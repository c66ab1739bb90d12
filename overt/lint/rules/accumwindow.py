"""Gradient accumulation whose optimizer step does not wait for the window (OVT129
``accumulation-window-broken``, issue 33, optimizers and parameters).

Accumulating over ``k`` micro-batches means one ``step()`` per ``k`` backward passes.  Two ways
the step runs (nearly) every micro-batch instead, each seen in one training loop:

- the window's test is a bare remainder, ``if i % k:``: it is true on ``k - 1`` iterations of
  every ``k`` and false on the one where the window is full (eriklindernoren/PyTorch-YOLOv3#313,
  fixed as ``if i % k == 0``);
- the loss is divided by the accumulation count (a name with ``accum`` in it) before
  ``backward()``, while the loop steps the optimizer after every backward, under no test at all.

Either way each update uses one micro-batch's gradient divided by ``k``: the learning rate is
``k`` times smaller and the batch ``k`` times smaller than configured.  Silent under Accelerate
(``accelerator.accumulate``, ``accelerator.backward``: the wrapped optimizer skips the steps
itself), for a remainder compared with something (``== 0``, ``!= k - 1``) or negated
(``not i % k``), and when the division's name does not say accumulation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import events
from overt.lint.analysis.units import loop_units
from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule


def _bare_remainder(test: ast.expr) -> ast.BinOp | None:
    """``i % k`` used as a truth value (the whole test, or one operand of ``and``)."""
    if isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod):
        return test
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for v in test.values:
            found = _bare_remainder(v)
            if found is not None:
                return found
    return None


def _window_if(ix: FileIndex, node: ast.AST, stop: ast.AST) -> ast.If | None:
    """The closest ``if`` around ``node`` (inside ``stop``) whose body, not its else, holds it."""
    child = node
    for anc in ix.ancestors(node):
        if anc is stop:
            return None
        if isinstance(anc, ast.If) and any(child is s for s in anc.body):
            return anc
        child = anc
    return None


def _accum_name(expr: ast.expr) -> str | None:
    text = dotted(expr) or ""
    return text if "accum" in text.lower() else None


def _divided_by_window(ix: FileIndex, loop: ast.stmt, back_expr: ast.expr | None) -> str | None:
    """The accumulation count the loss given to backward() is divided by, if any."""
    if back_expr is None:
        return None
    candidates = [back_expr]
    name = dotted(back_expr)
    if name is not None:
        for n in ix.scope_nodes(loop):
            if isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets):
                candidates.append(n.value)
            elif isinstance(n, ast.AugAssign) and dotted(n.target) == name and isinstance(n.op, ast.Div):
                found = _accum_name(n.value)
                if found:
                    return found
    for c in candidates:
        for n in ast.walk(c):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
                found = _accum_name(n.right)
                if found:
                    return found
    return None


def _accelerate(ix: FileIndex, loop: ast.stmt) -> bool:
    for n in ast.walk(loop):
        if isinstance(n, ast.Attribute) and n.attr in ("accumulate", "no_sync") and "accelerator" in (
                dotted(n.value) or ""):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward" \
                and "accelerator" in (dotted(n.func.value) or ""):
            return True
    return False


@rule("accumulation-window-broken")
def accumulation_window_broken(ix: FileIndex) -> Iterator[Hit]:
    for loop in loop_units(ix):
        if _accelerate(ix, loop):
            continue
        evs = events(ix, loop, depth=0)
        steps = [e for e in evs if e.kind == "step" and not e.nested]
        backs = [e for e in evs if e.kind == "backward" and not e.nested]
        if not steps or not backs:
            continue
        step = steps[0]
        window = _window_if(ix, step.node, loop)
        if window is not None:
            mod = _bare_remainder(window.test)
            if mod is not None and not any(any(b.node is n for n in ast.walk(window)) for b in backs):
                text = ix.segment(mod)
                yield Hit("accumulation-window-broken", window.test,
                          f"the optimizer steps under `if {text}:`, which is true on every iteration of the window "
                          f"but the last (a remainder is 0 only once per window): the step runs after k - 1 of every "
                          f"k backward() calls and skips the one where the window is full, so gradients are barely "
                          f"accumulated and each update uses about one micro-batch",
                          fix=f"step when the window is full: `if ({ix.segment(mod.left)} + 1) % "
                          f"{ix.segment(mod.right)} == 0:` (or `{text} == 0` for a counter that starts at 1)")
            continue
        # the step under no test at all: does the loss say it is accumulated?
        for back in backs:
            count = _divided_by_window(ix, loop, back.info.get("expr"))
            if count is None:
                continue
            opt = step.target or "the optimizer"
            yield Hit("accumulation-window-broken", step.node,
                      f"the loss is divided by `{count}` for gradient accumulation, but {opt}.step() runs after "
                      f"every backward(), under no window test: nothing accumulates, and every "
                      f"update uses one micro-batch's gradient divided by `{count}` (a learning rate `{count}` "
                      f"times smaller than configured)",
                      fix=f"step and reset only when the window is full: `if (i + 1) % {count} == 0:` around "
                      f"step() and zero_grad() (with a last step for a partial window at the end of the epoch)")
            break
