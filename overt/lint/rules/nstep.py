"""An n-step target bootstrapped with a single discount (OVT369 ``nstep-bootstrap-single-discount``, issue 33:
targets filled wrongly).

The premise: a target is the discounted sum of everything after its step, so the value it bootstraps from sits
as many discounts away as the rewards it sums span: ``R_t^(n) + gamma ** n * V(s_{t+n})``.  A file whose
transitions carry n-step returns (a window ``sum(gamma ** i * r for i, r in enumerate(rewards[t:t + n]))``, a loop
``for i in range(n): ret += gamma ** i * rewards[t + i]``) and whose every bootstrapped target discounts the next
value once (``r + gamma * q_next``) counts n steps of the future as one: distant rewards are overvalued and the
greedy policy takes detours whose true value is lower (qfettes/DeepRL-Tutorials#1; w147).

Proven from one file: a discount power ``gamma ** i`` (the base a name saying gamma/discount) whose exponent is
the variable of a loop or comprehension over a window of ``n`` steps, ``n`` a name or a constant other than 1
(``range(n)``, a slice ``[t:t + n]``, ``enumerate`` of one); a target ``reward + gamma * X`` outside that window
with the bare discount; and no target in the file discounted by a power (``gamma ** n``, ``gamma ** k``) or by a
name that says n-step (``gamma_n``, ``n_gamma``, ``discount_n``).  Files that bootstrap both ways are left alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.donemask import _factors, _rewardish

_DISCOUNT = re.compile(r"gamma|discount|γ", re.I)
_POWERED = re.compile(r"(^|_)n($|_)|nstep|n_step|multi", re.I)


def _discount_name(node: ast.AST) -> bool:
    name = dotted(node)
    return bool(name) and bool(_DISCOUNT.search(name.rsplit(".", 1)[-1]))


def _window(node: ast.AST, ix: FileIndex | None = None) -> ast.AST | None:
    """The window size ``n`` of ``range(n)``, ``x[t:t + n]``, ``enumerate(x[t:t + n])``, or of a name bound once to
    one of them or to a comprehension over one; None else."""
    if isinstance(node, ast.Call) and dotted(node.func) == "enumerate" and node.args:
        return _window(node.args[0], ix)
    if isinstance(node, ast.Name) and ix is not None:
        values = ix.assigns.get(node.id, [])
        if len(values) == 1:
            value = values[0]
            if isinstance(value, (ast.ListComp, ast.GeneratorExp)) and len(value.generators) == 1:
                return _window(value.generators[0].iter)
            return _window(value)
        return None
    if isinstance(node, ast.Call) and dotted(node.func) == "range" and len(node.args) == 1:
        return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        up = node.slice.upper
        if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add):
            return up.right
    return None


def _ranged(node: ast.AST, ix: FileIndex) -> bool:
    """Whether the window is a ``range(n)`` (directly or through ``enumerate``), not a slice from a step."""
    if isinstance(node, ast.Call) and dotted(node.func) == "enumerate" and node.args:
        return _ranged(node.args[0], ix)
    return isinstance(node, ast.Call) and dotted(node.func) == "range"


def _offset_read(loop: ast.AST, var: str) -> bool:
    """Whether the loop reads ``x[t + var]``: the window starts at another step."""
    for n in ast.walk(loop):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.BinOp) and isinstance(n.slice.op, ast.Add):
            names = _loop_vars(n.slice)
            if var in names and len(names) > 1:
                return True
    return False


def _loop_vars(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _nstep_windows(ix: FileIndex) -> list[tuple[ast.AST, ast.AST]]:
    """(the loop or comprehension, its window size) for each ``gamma ** i`` over an n-step window."""
    out = []
    for node in ix.kids:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _discount_name(node.left)
                and isinstance(node.right, ast.Name)):
            continue
        var = node.right.id
        for anc in ix.ancestors(node):
            gens = anc.generators if isinstance(anc, (ast.GeneratorExp, ast.ListComp)) else \
                [anc] if isinstance(anc, ast.For) else []
            for g in gens:
                if var in _loop_vars(g.target):
                    size = _window(g.iter, ix)
                    if size is None or isinstance(size, ast.Call) or (isinstance(size, ast.Constant)
                                                                      and size.value == 1):
                        continue  # no window, or one sized by a length (a whole episode's return)
                    if _ranged(g.iter, ix) and not _offset_read(anc, var):
                        continue  # range(n) over the first n rewards, not a window from each step
                    out.append((anc, size))
    return out


def _bootstraps(ix: FileIndex) -> list[tuple[ast.BinOp, ast.AST]]:
    """(target, its discount factor) for ``reward + discount * X`` (either order), X not a constant."""
    out = []
    for node in ix.kids:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            continue
        for reward, rest in ((node.left, node.right), (node.right, node.left)):
            if not _rewardish(reward):
                continue
            factors = _factors(rest)
            disc = [f for f in factors if _discount_name(f) or (isinstance(f, ast.BinOp) and isinstance(f.op, ast.Pow)
                                                                  and _discount_name(f.left))]
            if len(factors) >= 2 and len(disc) == 1 and any(not isinstance(f, ast.Constant) for f in factors
                                                             if f is not disc[0]):
                out.append((node, disc[0]))
                break
    return out


@rule("nstep-bootstrap-single-discount")
def nstep_bootstrap_single_discount(ix: FileIndex) -> Iterator[Hit]:
    windows = _nstep_windows(ix)
    if not windows:
        return
    inside = {id(n) for loop, _ in windows for n in ast.walk(loop)}
    targets = [(t, d) for t, d in _bootstraps(ix) if id(t) not in inside]
    if not targets:
        return
    for _, disc in targets:
        if isinstance(disc, ast.BinOp) or _POWERED.search((dotted(disc) or "").rsplit(".", 1)[-1]):
            return  # some target discounts by a power: the file bootstraps n steps somewhere
    target, disc = targets[0]
    loop, size = windows[0]
    n = ix.segment(size)
    yield Hit("nstep-bootstrap-single-discount", target,
              f"`{ix.segment(target)}` bootstraps with a single `{ix.segment(disc)}`, but the rewards of this file's "
              f"transitions are n-step returns (discounted over a window of `{n}` steps at line {loop.lineno}): the "
              f"value it adds sits `{n}` steps later, so it must be discounted by `{ix.segment(disc)} ** {n}`; "
              f"discounted once, the far future counts {n} steps as one, distant rewards are overvalued and the greedy "
              f"policy prefers long detours",
              fix=f"discount the bootstrap by the window: reward + {ix.segment(disc)} ** {n} * next_value (with the "
                  f"window cut short at an episode's end, by the steps actually summed)")
