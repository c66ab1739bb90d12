"""Gradient accumulation under data parallelism whose gradient synchronisation is not on the micro-batch the
step follows (OVT138 ``grad-sync-window-misaligned``, issue 33: the order of training events).

The premise: accumulating over ``k`` micro-batches across ranks, the gradients are all-reduced once per
window, on the backward of the window's last micro-batch, the one ``optimizer.step()`` follows (DDP's
``no_sync()`` keeps the others rank-local and the first backward outside it all-reduces what was
accumulated).  A window whose synchronisation test selects another micro-batch than the step's test -- the
first (``i % k == 0``) while the step waits for the last (``(i + 1) % k == 0``) -- all-reduces a partial sum
and leaves the last micro-batches rank-local: every rank steps on mostly its own gradients and the replicas
drift apart, with no error (modelscope/FunASR#3472).

Proven in one loop from the two tests' residues: the step's ``if`` and the synchronisation's test (an ``if``
around a call that all-reduces gradients, ``all_reduce``/``allreduce``/``sync_grad`` in its name; the
condition that picks ``model.no_sync()`` over a null context, whose negation is the synchronisation;
``require_backward_grad_sync = <test>``) are remainders of the same counter by the same modulus, compared
with ``0`` or ``k - 1`` (``i % k == 0``, ``(i + 1) % k == 0``, ``i % k != k - 1``, a bare ``i % k``), and
select different residues.  Silent when either test is anything else (a counter of its own, an
``or``-clause for the last batch is allowed), when the moduli or the counters differ, and under
frameworks that keep the window themselves (``accelerator.accumulate``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import LOOP_TYPES, SCOPE_TYPES, FileIndex, dotted
from overt.lint.rules.base import Hit, rule

#: a residue set: (counter, modulus, residue, selected) -- ``counter % modulus == residue`` when ``selected``,
#: its complement otherwise; the residue is 0 or -1 (``modulus - 1``)
Window = tuple[str, str, int, bool]


def _remainder(node: ast.AST) -> tuple[str, str, int] | None:
    """``i % k`` -> (``i``, ``k``, 0); ``(i + 1) % k`` -> (``i``, ``k``, 1); ``(i - 1) % k`` -> offset -1."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)):
        return None
    k = dotted(node.right) or (str(node.right.value) if isinstance(node.right, ast.Constant)
                                and isinstance(node.right.value, int) else None)
    left, off = node.left, 0
    if isinstance(left, ast.BinOp) and isinstance(left.op, (ast.Add, ast.Sub)) \
            and isinstance(left.right, ast.Constant) and isinstance(left.right.value, int) \
            and not isinstance(left.right.value, bool):
        off = left.right.value if isinstance(left.op, ast.Add) else -left.right.value
        left = left.left
    counter = dotted(left)
    if not counter or not k or k == "1" or off not in (-1, 0, 1):
        return None
    return counter, k, off


def _residue(rhs: ast.AST, k: str) -> int | None:
    """0 for ``0``; -1 for ``k - 1``."""
    if isinstance(rhs, ast.Constant) and rhs.value == 0 and not isinstance(rhs.value, bool):
        return 0
    if isinstance(rhs, ast.BinOp) and isinstance(rhs.op, ast.Sub) and dotted(rhs.left) == k \
            and isinstance(rhs.right, ast.Constant) and rhs.right.value == 1:
        return -1
    if k.isdigit() and isinstance(rhs, ast.Constant) and rhs.value == int(k) - 1:
        return -1
    return None


def _window(test: ast.AST) -> Window | None:
    """The residues a test selects, or None when it is not a window test this rule can read."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):  # `... or last batch`: the window part
        found = [w for w in (_window(v) for v in test.values) if w is not None]
        return found[0] if len(found) == 1 else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _window(test.operand)
        return None if inner is None else (inner[0], inner[1], inner[2], not inner[3])
    rem = _remainder(test)
    if rem is not None:  # a bare remainder: true off residue 0
        counter, k, off = rem
        return counter, k, _shift(0, off), False
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        rem = _remainder(test.left)
        if rem is None:
            return None
        counter, k, off = rem
        r = _residue(test.comparators[0], k)
        if r is None:
            return None
        return counter, k, _shift(r, off), isinstance(test.ops[0], ast.Eq)
    return None


def _shift(r: int, off: int) -> int | None:
    """``(i + off) % k == r`` as ``i % k == r - off``, kept when that is 0 or -1."""
    out = r - off
    return out if out in (0, -1) else None


def _selected(w: Window | None) -> tuple[str, str, int] | None:
    """The one residue a window selects (a complement of one residue selects k - 1 of them: None)."""
    if w is None or w[2] is None or not w[3]:
        return None
    return w[0], w[1], w[2]


def _is_sync_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = (dotted(node.func) or "").rsplit(".", 1)[-1].lower()
    return "all_reduce" in name or "allreduce" in name or ("sync" in name and "grad" in name)


def _is_no_sync(node: ast.AST) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr == "no_sync"


def _enclosing_if(ix: FileIndex, node: ast.AST, loop: ast.stmt) -> tuple[ast.If, bool] | None:
    """The closest ``if`` around ``node`` inside ``loop``, and whether ``node`` is in its body (not its else)."""
    child = node
    for anc in ix.ancestors(node):
        if anc is loop or isinstance(anc, SCOPE_TYPES):
            return None
        if isinstance(anc, ast.If):
            if any(child is s for s in anc.body):
                return anc, True
            if any(child is s for s in anc.orelse):
                return anc, False
        child = anc
    return None


def _negate(w: Window | None) -> Window | None:
    return None if w is None else (w[0], w[1], w[2], not w[3])


def _sync_windows(ix: FileIndex, loop: ast.stmt) -> list[tuple[ast.AST, Window]]:
    out: list[tuple[ast.AST, Window]] = []
    for n in ix.scope_nodes(loop):
        if _is_sync_call(n):
            found = _enclosing_if(ix, n, loop)
            if found is not None:
                w = _window(found[0].test)
                out.append((found[0].test, w if found[1] else _negate(w)))
        elif isinstance(n, ast.IfExp) and (_is_no_sync(n.body) or _is_no_sync(n.orelse)):
            w = _window(n.test)  # no_sync() when the test holds: the gradients sync when it does not
            out.append((n.test, _negate(w) if _is_no_sync(n.body) else w))
        elif isinstance(n, ast.If) and any(_is_no_sync(c) for s in n.body if isinstance(s, ast.With)
                                           for c in (i.context_expr for i in s.items)):
            out.append((n.test, _negate(_window(n.test))))
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "require_backward_grad_sync"
                                               for t in n.targets):
            out.append((n.value, _window(n.value)))
    return [(node, w) for node, w in out if w is not None]


def _optimizer(ix: FileIndex, node: ast.AST) -> bool:
    """An optimizer, or the target of a ``for`` over optimizers (``for o in opts: o.step()``)."""
    text = dotted(node)
    if not text or ix.is_scheduler(text):
        return False
    if ix.is_optimizer(text):
        return True
    for anc in ix.ancestors(node):
        if isinstance(anc, (ast.For, ast.AsyncFor)) and dotted(anc.target) == text:
            it = (dotted(anc.iter) or "").lower()
            return it.startswith("opt") or it.endswith("optimizers")
    return False


def _step_window(ix: FileIndex, loop: ast.stmt) -> tuple[ast.AST, Window] | None:
    for n in ix.scope_nodes(loop):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step" \
                and _optimizer(ix, n.func.value):
            found = _enclosing_if(ix, n, loop)
            if found is None:
                return None
            w = _window(found[0].test)
            return (found[0].test, w if found[1] else _negate(w)) if w is not None else None
    return None


def _describe(counter: str, r: int, k: str) -> str:
    return f"the micro-batches where `{counter} % {k} == {'0' if r == 0 else k + ' - 1'}`"


@rule("grad-sync-window-misaligned")
def grad_sync_window_misaligned(ix: FileIndex) -> Iterator[Hit]:
    if any("accelerate" in (ix.aliases.get(a) or "") for a in ix.aliases):
        return  # Accelerate keeps the window itself
    seen: set[int] = set()
    for loop in ix.loops:
        if not isinstance(loop, LOOP_TYPES):
            continue
        step = _step_window(ix, loop)
        if step is None:
            continue
        step_sel = _selected(step[1])
        if step_sel is None:
            continue
        for node, w in _sync_windows(ix, loop):
            sync_sel = _selected(w)
            if sync_sel is None or sync_sel[:2] != step_sel[:2] or sync_sel[2] == step_sel[2] or id(node) in seen:
                continue
            seen.add(id(node))
            counter, k = step_sel[0], step_sel[1]
            yield Hit("grad-sync-window-misaligned", node,
                      f"the gradients are synchronised across ranks on {_describe(counter, sync_sel[2], k)} (the "
                      f"test `{ix.segment(node)}`), but the optimizer steps on {_describe(counter, step_sel[2], k)} "
                      f"(`{ix.segment(step[0])}`, line {step[0].lineno}): the all-reduce sums a partial window and the "
                      f"micro-batches after it stay rank-local, so each rank steps on mostly its own gradients and "
                      f"the replicas drift apart",
                      fix=f"synchronise on the micro-batch the step follows: take the step's test "
                          f"(`{ix.segment(step[0])}`) for the synchronisation too, and keep no_sync() on the others")
            break
