"""Discounted returns accumulated forward in time (OVT326 ``returns-from-past-rewards``, issue 33).

The return of step ``t`` is the discounted sum of the rewards *from* ``t`` on:
``G_t = r_t + gamma * G_{t+1}``, computed by a loop that runs from the last step to the first.  The
same recursion run from the first step to the last gives each step the discounted sum of the
rewards *before* it, and credits an action for what already happened.

The rule: a ``for`` loop running forward -- over ``range(...)`` with no negative step, over a
rewards sequence, or ``enumerate`` of one; not ``reversed(...)`` nor a ``[::-1]`` slice -- whose
body assigns ``G = <reward> + <discount> * G`` (either order; the discount factor a name that says
gamma/discount or a literal in [0.8, 1); extra factors such as a not-done mask allowed) and stores
``G`` per step in that loop (``out[t] = G``, ``returns.append(G)``).  ``<reward>`` must be read from
a name that says reward (``rewards[t]``, ``r`` of ``for r in rewards``).  A loop that only sums a
total (nothing stored per step), or a recursion on anything but rewards (an eligibility trace), is
left alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_REWARD = re.compile(r"(^|_)(r|rs|rew|rews|reward|rewards|rwd|rwds)($|_)", re.I)
_DISCOUNT = re.compile(r"gamma|discount|γ", re.I)


def _forward(loop: ast.For) -> tuple[set[str], set[str]] | None:
    """(names of the loop's index, names of the reward items) when ``loop`` runs forward over time."""
    it, target = loop.iter, loop.target
    if isinstance(it, ast.Call) and dotted(it.func) in ("range", "enumerate") and it.args:
        if dotted(it.func) == "range":
            if len(it.args) == 3:
                step = it.args[2]
                if not (isinstance(step, ast.Constant) and isinstance(step.value, int) and step.value > 0):
                    return None
            return ({target.id} if isinstance(target, ast.Name) else set()), set()
        seq = it.args[0]
        if _reversed(seq) or not _rewardish(seq):
            return None
        elts = target.elts if isinstance(target, ast.Tuple) else []
        if len(elts) == 2 and all(isinstance(e, ast.Name) for e in elts):
            return {elts[0].id}, {elts[1].id}
        return None
    if _reversed(it) or not _rewardish(it) or not isinstance(target, ast.Name):
        return None
    return set(), {target.id}


def _reversed(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and dotted(node.func) in ("reversed", "torch.flip", "np.flip", "flip"):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "flip":
        return True
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.step is not None


def _rewardish(node: ast.AST) -> bool:
    name = dotted(node)
    if name is None and isinstance(node, ast.Subscript):
        name = dotted(node.value)
    return bool(name) and bool(_REWARD.search(name.rsplit(".", 1)[-1]))


def _factors(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _is_discount(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return 0.8 <= node.value < 1
    name = dotted(node)
    return bool(name) and bool(_DISCOUNT.search(name))


def _reward_term(node: ast.AST, index: set[str], items: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in items
    if isinstance(node, ast.Subscript):  # rewards[t]; rewards[T - 1 - t] walks backward
        return _rewardish(node.value) and isinstance(node.slice, ast.Name) and node.slice.id in index
    return False


def _recursion(stmt: ast.stmt, index: set[str], items: set[str]) -> str | None:
    """``G`` when ``stmt`` is ``G = reward + discount * G`` (either order)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    g = stmt.targets[0].id
    value = stmt.value
    if not isinstance(value, ast.BinOp) or not isinstance(value.op, ast.Add):
        return None
    for reward, rest in ((value.left, value.right), (value.right, value.left)):
        factors = _factors(rest)
        if _reward_term(reward, index, items) and any(isinstance(f, ast.Name) and f.id == g for f in factors) \
                and any(_is_discount(f) for f in factors):
            return g
    return None


def _stored(loop: ast.For, g: str, index: set[str]) -> bool:
    """Whether the loop keeps ``g`` per step: ``out[t] = g`` or ``xs.append(g)``."""
    for sub in ast.walk(loop):
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name) and sub.value.id == g:
            for t in sub.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id in index:
                    return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "append" \
                and len(sub.args) == 1 and isinstance(sub.args[0], ast.Name) and sub.args[0].id == g:
            return True
    return False


@rule("returns-from-past-rewards")
def returns_from_past_rewards(ix: FileIndex) -> Iterator[Hit]:
    for loop in ix.loops:
        if not isinstance(loop, ast.For):
            continue
        found = _forward(loop)
        if found is None:
            continue
        index, items = found
        for stmt in loop.body:
            g = _recursion(stmt, index, items)
            if g is not None and _stored(loop, g, index):
                yield Hit("returns-from-past-rewards", stmt,
                          f"`{ix.segment(stmt)}` accumulates the discounted return while the loop at line "
                          f"{loop.lineno} runs forward in time: each step's stored return is the discounted sum of "
                          "the rewards before it, not after it, so actions are credited for what already happened",
                          fix="run the recursion from the last step to the first (for t in reversed(range(T)): "
                          "G = r[t] + gamma * G; returns[t] = G), or reverse the list it builds")
                break
