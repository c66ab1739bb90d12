"""Two sets meant to be disjoint drawn by separate draws from one pool (OVT542 ``disjoint-sets-overlap``, issue 33).

An invariant of every correct evaluation: the examples a model is scored on are not the examples it was
given -- a few-shot task's query set is disjoint from its support set, a validation set from its training
set.  Drawing the two sets by two independent draws from the same pool breaks it: each draw is random on
its own, so the second one picks examples of the first (15 queries and 5 supports drawn separately from 20
examples share almost 4 of them); a query that is also a support example is matched to itself at distance
zero, a validation sample that is also a training sample is memorised, and the reported accuracy is
inflated (tristandeleu/pytorch-meta#31: "samples from ``dataset_indices`` are redrawn at each function call
and can overlap within multiple function calls").

The rule: two draws in one function -- ``random.sample(P, k)``/``random.choices(P, k=k)`` (the module or a
``random.Random``), ``np.random.choice(P, k)`` (or a generator's ``choice``), ``P[torch.randperm(len(P))[:k]]``
or ``torch.randperm(n)[:k]`` -- from the same pool (the same expression, none of its names bound again
between them), whose results go to two sets with opposite roles: support and query, or training and
validation/test (the names they are bound to, or the lists they are added to: ``support += [... for i in
s]``).  Quiet where the second draw excludes the first (a pool without it, a later filter of one by the
other), and on one permutation cut in two (``perm[:k]``, ``perm[k:]``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import EVAL_TOKENS, FileIndex, dotted, kwarg, names_in, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.filterset import filter_misses_split
from overt.lint.rules.junkmatches import camera_ids_unused
from overt.lint.rules.queryself import neighbours_of_themselves, query_in_gallery
from overt.lint.rules.seenitems import seen_items_ranked
from overt.lint.rules.splitdraw import split_redrawn

_SUPPORT = frozenset({"support", "supports", "shot", "shots"})
_QUERY = frozenset({"query", "queries"})
_TRAIN = frozenset({"train", "training", "trn"})
_EVAL = EVAL_TOKENS
_WRAPPERS = frozenset({"list", "set", "sorted", "np.array", "torch.tensor"})


def _pool(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    """The pool a draw without a shared permutation takes from, or None when ``node`` is not such a draw."""
    if isinstance(node, ast.Call):
        f = node.func
        qual = ix.qualname(f) or dotted(f) or ""
        last = f.attr if isinstance(f, ast.Attribute) else qual.rsplit(".", 1)[-1]
        if last in ("sample", "choices") and node.args and (qual.startswith("random.") or _random_instance(ix, f)):
            return node.args[0]
        if last == "choice" and node.args and (len(node.args) > 1 or kwarg(node, "size") is not None) and (
                qual.startswith(("numpy.random.", "np.random.")) or _random_instance(ix, f)):
            return node.args[0]
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None \
            and node.slice.upper is not None and isinstance(node.value, ast.Call):
        perm = node.value
        if (dotted(perm.func) or "").rsplit(".", 1)[-1] in ("randperm", "permutation") and perm.args:
            return perm.args[0]
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        inner = _pool(ix, node.slice)
        if inner is not None and _length_of(inner) == dotted(node.value) and dotted(node.value):
            return node.value
    return None


def _length_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and dotted(node.func) == "len" and node.args:
        return dotted(node.args[0])
    return None


def _random_instance(ix: FileIndex, func: ast.AST) -> bool:
    """``rng.sample``/``rng.choice`` on a name bound to ``random.Random(...)`` or ``np.random.default_rng(...)``."""
    if not isinstance(func, ast.Attribute):
        return False
    owner = dotted(func.value)
    for value in ix.assigns.get(owner or "", []):
        if isinstance(value, ast.Call) and (ix.qualname(value.func) or "").rsplit(".", 1)[-1] in (
                "Random", "default_rng", "RandomState", "SystemRandom"):
            return True
    return False


def _roles(ix: FileIndex, name: str, scope: ast.AST | None) -> set[str]:
    """Role words of ``name`` and of the collections it is added to in ``scope``."""
    words = set(tokens(name))
    for node in ix.scope_nodes(scope) if scope is not None else ast.walk(ix.tree):
        if isinstance(node, ast.AugAssign) and name in names_in(node.value):
            words |= set(tokens(dotted(node.target) or ""))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and name in names_in(node.value):
            target = dotted(node.targets[0])
            if target and target != name:
                words |= set(tokens(target))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "extend", "append", "update") and any(name in names_in(a) for a in node.args):
            words |= set(tokens(dotted(node.func.value) or ""))
    return words


def _opposite(a: set[str], b: set[str]) -> str | None:
    if a & _SUPPORT and b & _QUERY or a & _QUERY and b & _SUPPORT:
        return "support and query sets"
    if a & _TRAIN and b & _EVAL and not b & _TRAIN or a & _EVAL and b & _TRAIN and not a & _TRAIN:
        return "training and evaluation sets"
    return None


def _draws(ix: FileIndex) -> list[tuple[ast.stmt, str, ast.AST, ast.AST]]:
    """(statement, bound name, the draw, its pool) for every name bound to a draw."""
    out = []
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and isinstance(
            value, ast.Tuple) and len(target.elts) == len(value.elts) else [(target, value)]
        for t, v in pairs:
            if not isinstance(t, ast.Name):
                continue
            core = v
            while isinstance(core, ast.Call) and dotted(core.func) in _WRAPPERS and core.args:
                core = core.args[0]
            pool = _pool(ix, core)
            if pool is not None:
                out.append((node, t.id, core, pool))
    return out


def _rebound_between(ix: FileIndex, names: set[str], first: ast.stmt, second: ast.stmt,
                     scope: ast.AST | None) -> bool:
    for node in ix.scope_nodes(scope) if scope is not None else ast.walk(ix.tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.For)) and first.lineno < node.lineno < second.lineno:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(names & names_in(t) for t in targets):
                return True
    return False


def _excluded(ix: FileIndex, a: str, b: str, scope: ast.AST | None) -> bool:
    """A later binding of one name that refers to the other (``q = [i for i in q if i not in s]``)."""
    for node in ix.scope_nodes(scope) if scope is not None else ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in (a, b) for t in node.targets):
            own = next(t.id for t in node.targets if isinstance(t, ast.Name) and t.id in (a, b))
            other = b if own == a else a
            if own in names_in(node.value) and other in names_in(node.value):
                return True
    return False


@rule("disjoint-sets-overlap")
def disjoint_sets_overlap(ix: FileIndex) -> Iterator[Hit]:
    """Sets drawn apart from one pool (here), top-N lists over the training items (:mod:`.seenitems`), a split
    drawn again by each process (:mod:`.splitdraw`), a ranking filter that leaves out a split of the known
    positives (:mod:`.filterset`), queries ranked against a gallery that holds them (:mod:`.queryself`), a
    re-identification ranking that keeps the query's own-camera matches (:mod:`.junkmatches`)."""
    yield from _drawn_apart(ix)
    yield from seen_items_ranked(ix)
    yield from split_redrawn(ix)
    yield from filter_misses_split(ix)
    yield from query_in_gallery(ix)
    yield from neighbours_of_themselves(ix)
    yield from camera_ids_unused(ix)


def _drawn_apart(ix: FileIndex) -> Iterator[Hit]:
    draws = _draws(ix)
    if len(draws) < 2:
        return
    done: set[int] = set()
    for i, (s1, n1, d1, p1) in enumerate(draws):
        for s2, n2, d2, p2 in draws[i + 1:]:
            if n1 == n2 or id(d2) in done or ast.dump(p1) != ast.dump(p2):
                continue
            scope = ix.enclosing_function(s1)
            if ix.enclosing_function(s2) is not scope or s2.lineno < s1.lineno:
                continue
            if s1 is not s2 and _rebound_between(ix, names_in(p1), s1, s2, scope):
                continue
            if n1 in names_in(p2) or n2 in names_in(p1) or _excluded(ix, n1, n2, scope):
                continue
            roles = _opposite(_roles(ix, n1, scope), _roles(ix, n2, scope))
            if roles is None:
                continue
            done.add(id(d2))
            pool = ast.unparse(p1)
            yield Hit("disjoint-sets-overlap", d2,
                      f"`{ix.segment(d2)}` draws `{n2}` from `{pool}` on its own, apart from the draw of `{n1}` "
                      f"(`{ix.segment(d1)}`, line {d1.lineno}): the two are meant as disjoint {roles}, but each "
                      f"random draw is made without the other, so they share samples, and a sample scored in one "
                      f"was given in the other: the reported accuracy is inflated",
                      fix=f"draw once and cut: shuffle `{pool}` once (random.sample(pool, len(pool)) or "
                          "torch.randperm) and take the first k for one set and the rest for the other, or draw "
                          "the second set from the pool without the first")
