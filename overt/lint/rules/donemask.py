"""A bootstrapped target that ignores the termination flags the program has (OVT366 ``bootstrap-ignores-done``,
issue 33: targets built from memory the program never filled, or filled wrongly).

The premise: a temporal-difference target ``r + gamma * V(s')`` bootstraps from the next state only when the
transition did not end its episode; a program that has the termination flags of its transitions (``done``
unpacked beside the rewards and the next states, from a replay sample, a batch or ``env.step``) uses them to cut
the bootstrap.  Flags bound and then never read anywhere in the file, while the file builds such a target, are
flags the target forgot: every episode's last step is credited with the value of whatever the environment
reports next (the next episode's first state, after an auto-reset), and values and policies learn returns that do
not exist (navneet-nmk/pytorch-rl#2, seungeunrho/minimalRL#21; w38).

Proven from one file: a name that says termination (``done``, ``dones``, ``terminal``, ``terminated``,
``is_terminal``, ...) is bound by unpacking (a tuple target of an assignment or a ``for``) together with a name
that says reward, and is read nowhere in its scope (a function's body; for the module, the file but functions
that bind the name themselves; no ``locals()``/``vars()``/``eval``/``exec``/``global`` that could read it out of
sight); the same scope forms ``reward + discount * X`` where the discount is
a name that says gamma/discount or a literal in [0.8, 1), ``X`` is computed by a call (a network, a ``max``, a
``gather``) and no factor of the product is a mask (a name that says mask/nonterminal/not_done/alive, or
``1 - ...``).  Other flags that mask (a ``masks`` tensor from a rollout storage) are the rule's silence: any
read of the termination name, any mask-like factor.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import SCOPE_TYPES, FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_DONE = re.compile(r"^(dones?|terminals?|terminated|terminateds|terminations?|is_terminal|is_done|episode_ends?|"
                   r"d_batch|done_batch|batch_dones?|dones?_batch|done_mask|next_dones?)$", re.I)
_REWARD = re.compile(r"(^|_)(r|rs|rew|rews|reward|rewards|rwd|rwds|ret|rets|returns?)($|_)", re.I)
_DISCOUNT = re.compile(r"gamma|discount|γ", re.I)
_MASK = re.compile(r"mask|nonterm|non_term|not_done|notdone|alive|continu|undone|live|dones?|terminal|terminated",
                   re.I)
_DYNAMIC = ("locals", "globals", "vars", "eval", "exec")


def _factors(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _name_of(node: ast.AST) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    name = dotted(node)
    return name.rsplit(".", 1)[-1] if name else ""


def _rewardish(node: ast.AST) -> bool:
    return bool(_REWARD.search(_name_of(node)))


def _is_discount(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return 0.8 <= node.value < 1
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _is_discount(node.left)
    name = dotted(node)
    return bool(name) and bool(_DISCOUNT.search(name))


def _masking(node: ast.AST) -> bool:
    """A factor that may cut the bootstrap: ``1 - x``, ``~x``, ``not x``, or any name in it that says mask."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return True
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and _MASK.search(sub.id):
            return True
        if isinstance(sub, ast.Attribute) and _MASK.search(sub.attr):
            return True
    return False


def _bootstrap(node: ast.BinOp) -> bool:
    """``reward + discount * X`` (either order), ``X`` computed by a call, no factor a mask."""
    if not isinstance(node.op, ast.Add):
        return False
    for reward, rest in ((node.left, node.right), (node.right, node.left)):
        if not _rewardish(reward):
            continue
        factors = _factors(rest)
        if len(factors) < 2 or not any(_is_discount(f) for f in factors):
            continue
        values = [f for f in factors if not _is_discount(f)]
        if any(_masking(f) for f in factors):
            return False
        if values and any(isinstance(s, ast.Call) for f in values for s in ast.walk(f)):
            return True
    return False


def _unpacked_flags(ix: FileIndex) -> list[tuple[ast.Name, ast.AST]]:
    """Termination names bound by unpacking beside a reward name: (the Name node, the statement)."""
    out = []
    for node in ix.kids:
        if isinstance(node, ast.Assign):
            targets, stmt = node.targets, node
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets, stmt = [node.target], node
        else:
            continue
        for target in targets:
            if not isinstance(target, (ast.Tuple, ast.List)):
                continue
            names = [e for e in target.elts if isinstance(e, ast.Name)]
            if not any(_REWARD.search(e.id) for e in names):
                continue
            out.extend((e, stmt) for e in names if _DONE.match(e.id))
    return out


def _scope(ix: FileIndex, node: ast.AST) -> ast.AST:
    return next((a for a in ix.ancestors(node) if isinstance(a, SCOPE_TYPES)), ix.tree)


def _read_in(ix: FileIndex, name: str, scope: ast.AST) -> bool:
    """Whether ``name`` is read in ``scope``: anywhere inside a function; for the module, anywhere in the file
    but in functions that bind the name themselves (their own local)."""
    for n in ast.walk(scope):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            if scope is ix.tree:
                inner = _scope(ix, n)
                if inner is not ix.tree and any(isinstance(m, ast.Name) and m.id == name
                                                and isinstance(m.ctx, ast.Store) for m in ast.walk(inner)):
                    continue
            return True
    return False


@rule("bootstrap-ignores-done")
def bootstrap_ignores_done(ix: FileIndex) -> Iterator[Hit]:
    if any(isinstance(c.func, ast.Name) and c.func.id in _DYNAMIC for c in ix.calls) or any(
            isinstance(n, (ast.Global, ast.Nonlocal)) for n in ix.kids):
        return  # names read out of sight
    for flag, stmt in _unpacked_flags(ix):
        scope = _scope(ix, stmt)
        if _read_in(ix, flag.id, scope):
            continue  # the program reads its flags here: it has a place where it cuts bootstraps
        target = next((n for n in ix.scope_nodes(scope) if isinstance(n, ast.BinOp) and _bootstrap(n)), None)
        if target is None:
            continue
        yield Hit("bootstrap-ignores-done", target,
                  f"`{ix.segment(target)}` bootstraps from the next state with no termination mask, while the "
                  f"episode-end flags `{flag.id}` (unpacked at line {stmt.lineno}) are never read: at every "
                  f"transition that ends an episode the target adds the discounted value of whatever state comes "
                  f"next (after an auto-reset, the next episode's start), so the learned values credit the last step "
                  f"of each episode with returns that do not exist and the policy learns from them",
                  fix=f"cut the bootstrap at terminal transitions: reward + gamma * (1 - {flag.id}) * next_value "
                      f"(with {flag.id} as a float tensor), or drop the flags if the task never terminates")
        return  # one finding per file: the first target names the cause
