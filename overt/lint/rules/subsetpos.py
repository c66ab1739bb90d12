"""Positions within a subset used as indices of the whole set (OVT545 ``subset-positions-as-ids``; issue 33,
w208).

A ranking of values computed over a subset ``A[S]`` (``argsort``, ``topk``, ``argmax`` ... of the model's
scores of the unlabelled pool, of the candidates a filter kept) gives positions in ``S``: the item at
position ``r`` is ``S[r]``.  Every array of the whole set (``A`` itself, or an array indexed by ``S``
elsewhere, or one cut from the same split as ``A``) must be read at ``S[r]``; read at ``r`` it returns
another item's value: an active-learning oracle hands the queried samples the labels of other samples, a
re-ranker returns other documents, nothing fails.

Proven from the code, in one scope (a function or the module): a name ``r`` bound to a ranking of an
expression computed from ``A[S]`` (``S`` a name; through ``torch.tensor``/``np.array``/``torch.as_tensor``/
``torch.from_numpy`` and through names bound from it), and the code maps ``r`` through ``S`` itself
(``S[r]``, or ``S[i]`` for ``i`` iterating ``r``) -- so ``r`` is a position in ``S`` -- while it also
subscripts ``B[r]`` (or ``B[i]``) directly, where ``B`` is ``A``, an array subscripted with ``S``
elsewhere in the scope, an array bound from a subscript with the same index as ``A``'s, or the labels
named after the inputs ``A`` (``y_all`` for ``x_all``, ``Y`` for ``X``).  Silent when
``r`` is never mapped through ``S`` (a prefix slice or an identity index would make ``B[r]`` right).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_RANK = frozenset({"argsort", "argmax", "argmin", "topk", "argpartition"})
_WRAP = frozenset({"tensor", "array", "asarray", "as_tensor", "from_numpy", "LongTensor", "asnumpy"})
_MODULES = frozenset({"np", "numpy", "torch", "int", "list", "len", "range"})


def _index_name(node: ast.AST) -> str | None:
    """``S`` for ``S``, ``torch.tensor(S)``, ``np.array(S)``, ``S.long()``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and len(node.args) == 1 and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _WRAP:
        return _index_name(node.args[0])
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("long", "numpy", "cpu", "tolist", "int"):
        return _index_name(node.func.value)
    return None


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _targets(stmt: ast.Assign) -> set[str]:
    return {e.id for t in stmt.targets for e in ast.walk(t) if isinstance(e, ast.Name)}


def _subset_reads(nodes: list[ast.AST]) -> list[tuple[ast.Subscript, str, str]]:
    """(node, A, S) for each ``A[S]`` with ``S`` an index name."""
    out = []
    for n in nodes:
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and dotted(n.value):
            s = _index_name(n.slice)
            if s and s != dotted(n.value):
                out.append((n, dotted(n.value) or "", s))
    return out


def _derived(assigns: list[ast.Assign], seeds: set[str]) -> set[str]:
    """Names bound (transitively) from expressions that read one of ``seeds``."""
    found = set(seeds)
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if _loads(a.value) & found and not _targets(a) <= found:
                found |= _targets(a)
                changed = True
    return found


def _ranking_of(value: ast.AST, derived: set[str]) -> bool:
    """``value`` ranks an expression computed from the subset (a ranking call on it, maybe sliced and
    converted afterwards)."""
    for n in ast.walk(value):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _RANK:
            ranked = n.func.value
            if dotted(ranked) in ("np", "numpy", "torch") and n.args:
                ranked = n.args[0]
            if _loads(ranked) & derived:
                return True
    return False


def _pure(node: ast.AST, names: set[str]) -> bool:
    """``node`` is one of ``names``, maybe wrapped in a conversion (``torch.tensor(r)``, ``int(r)``)."""
    loads = _loads(node) - _MODULES
    return bool(loads) and loads <= names


def _loop_names(nodes: list[ast.AST], ranks: set[str]) -> set[str]:
    """Loop variables iterating a ranking: ``for i in r``, ``for i, x in zip(r, ...)``, ``enumerate(r)``'s value."""
    out: set[str] = set()
    for n in nodes:
        if not isinstance(n, (ast.For, ast.comprehension)):
            continue
        it, target = n.iter, n.target
        if _pure(it, ranks) and isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(it, ast.Call) and dotted(it.func) == "zip" and isinstance(target, ast.Tuple) \
                and len(target.elts) == len(it.args):
            for arg, elt in zip(it.args, target.elts):
                if _pure(arg, ranks) and isinstance(elt, ast.Name):
                    out.add(elt.id)
        elif isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args and _pure(it.args[0], ranks) \
                and isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name):
            out.add(target.elts[1].id)
    return out


def _siblings(ix: FileIndex, a: str, scope_nodes: list[ast.AST]) -> set[str]:
    """Arrays bound from a subscript with the same index as ``a`` (``x_pool, y_pool = X[idx], y[idx]``), in this
    scope or at module level."""
    index_of: dict[str, set[str]] = {}
    nodes = scope_nodes + ([] if scope_nodes and scope_nodes[0] is ix.tree else ix.scope_nodes(ix.tree))
    for n in nodes:
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        t, v = n.targets[0], n.value
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) \
            and len(t.elts) == len(v.elts) else [(t, v)]
        for name, value in pairs:
            if isinstance(name, ast.Name) and isinstance(value, ast.Subscript):
                index_of.setdefault(name.id, set()).add(ast.dump(value.slice))
    own = index_of.get(a, set())
    return {n for n, idx in index_of.items() if n != a and idx & own}


def _paired(a: str) -> set[str]:
    """The labels named after the inputs ``a``: ``y_all`` for ``x_all``, ``Y`` for ``X``, ``y_train`` for
    ``x_train``."""
    head, sep, rest = a.partition("_")
    if head in ("x", "X"):
        return {("y" if head == "x" else "Y") + sep + rest}
    return set()


def _scope_hits(ix: FileIndex, scope: ast.AST) -> Iterator[Hit]:
    nodes = ix.scope_nodes(scope)
    reads = _subset_reads(nodes)
    if not reads:
        return
    assigns = [n for n in nodes if isinstance(n, ast.Assign)]
    done: set[int] = set()
    for s in sorted({s for _, _, s in reads}):
        arrays = {a for _, a, s2 in reads if s2 == s}
        seeds = {t for a in assigns for t in _targets(a)
                 if any(sub in ast.walk(a.value) for sub, _, s2 in reads if s2 == s)}
        derived = _derived(assigns, seeds)
        ranks = {t for a in assigns if _ranking_of(a.value, derived) for t in _targets(a)}
        if not ranks:
            continue
        ranks = _derived([a for a in assigns if _pure(a.value, ranks)], ranks)
        positions = ranks | _loop_names(nodes, ranks)
        subs = [n for n in nodes if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
                and _pure(n.slice, positions)]
        mapped = [n for n in subs if dotted(n.value) == s]
        if not mapped:
            continue
        whole = set(arrays)
        for a in arrays:
            whole |= _siblings(ix, a, nodes) | _paired(a)
        for n in subs:
            b = dotted(n.value)
            if b is None or b == s or b not in whole or id(n) in done:
                continue
            if b in derived:
                continue  # an array of the subset itself (its scores, its rows)
            done.add(id(n))
            a = sorted(arrays)[0]
            yield Hit("subset-positions-as-ids", n,
                      f"`{ix.segment(n)}` reads `{b}` (an array of the whole set, like `{a}`, which is read at "
                      f"`{s}`) at positions of a ranking computed over the subset `{a}[{s}]`; the code itself "
                      f"maps the same positions through `{s}` (`{ix.segment(mapped[0])}`, line "
                      f"{mapped[0].lineno}): position k of the ranking is item `{s}[k]`, so `{b}` at k is another "
                      "item's value (another sample's label, another document), while nothing fails",
                      fix=f"read the whole set's arrays at the items, not the positions: "
                          f"`{b}[{s}[...]]` (or index `{b}[{s}]` first and read that at the positions)")


@rule("subset-positions-as-ids")
def subset_positions_as_ids(ix: FileIndex) -> Iterator[Hit]:
    """Positions in a subset read as indices of the whole set, in the module and in every function."""
    yield from _scope_hits(ix, ix.tree)
    for node in ast.walk(ix.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _scope_hits(ix, node)
