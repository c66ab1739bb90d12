"""A retrieval evaluation whose queries are ranked against a gallery that holds each query itself (part of
OVT542 ``disjoint-sets-overlap``).

Recall@k, precision@k, mAP and nearest-neighbour accuracy over one set of embeddings (each sample the query
in turn, the others the gallery) must leave the query out of its own candidates: a sample is its own nearest
neighbour (distance 0, cosine similarity 1), so the first match of every query is itself, of its own label,
and recall@1 reads 1.0 whatever the embedding.

Proven from the code: a similarity or distance matrix of one set against itself (``X @ X.T``,
``torch.mm(X, X.t())``, ``torch.cdist(X, X)``, ``cosine_similarity(X)``, ``pairwise_distances(X)``,
``F.cosine_similarity(X[:, None], X[None], dim=-1)``), bound once and used by nothing but a ranking over its
rows (``topk``, ``argsort``, ``argmax``/``argmin``), whose indices look up labels that are compared
(``==``) with labels.  Any other statement that touches the matrix (a filled diagonal, ``S - eye``, a
``masked_fill``), a ranking that drops its first column (``[:, 1:]``) or asks for one more neighbour than it
keeps is taken as the exclusion, and the rule is silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, names_in, tokens
from overt.lint.rules.base import Hit

_SELF_ONE = frozenset({"cosine_similarity", "pairwise_distances", "euclidean_distances", "cosine_distances",
                       "pdist_matrix", "squareform"})
_SELF_TWO = frozenset({"cdist", "mm", "matmul", "dot", "einsum_pair", "pairwise_distance"})
_RANK = frozenset({"topk", "argsort", "argmax", "argmin", "sort", "argpartition"})
_LABELS = frozenset({"label", "labels", "y", "target", "targets", "class", "classes", "cls", "pid", "pids", "ids",
                     "id", "lbl", "lbls", "gt"})


def _transposed(node: ast.AST) -> str | None:
    """``X`` for ``X.T``, ``X.t()``, ``X.transpose(0, 1)``, ``X.T.contiguous()``."""
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "H"):
        return dotted(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "t" and not node.args:
            return dotted(node.func.value)
        if node.func.attr in ("transpose", "permute") and len(node.args) == 2:
            return dotted(node.func.value)
    return None


def _unsqueezed(node: ast.AST) -> str | None:
    """``X`` for ``X[:, None]``, ``X[None]``, ``X.unsqueeze(k)``."""
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze":
        return dotted(node.func.value)
    return None


def self_matrix(node: ast.AST) -> str | None:
    """The one set a similarity or distance matrix compares with itself, or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        a, b = dotted(node.left), _transposed(node.right)
        return a if a and a == b else None
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func) or ""
    last = name.rsplit(".", 1)[-1]
    args = node.args
    if last in _SELF_ONE and len(args) == 1 and not kwarg(node, "Y") and dotted(args[0]):
        if last == "cosine_similarity" and name.startswith(("F.", "torch.", "nn.functional.")):
            return None  # torch's cosine_similarity needs two tensors
        return dotted(args[0])
    if last == "cosine_similarity" and len(args) >= 2:
        a, b = _unsqueezed(args[0]), _unsqueezed(args[1])
        return a if a and a == b and args[0] is not args[1] and ast.dump(args[0]) != ast.dump(args[1]) else None
    if last in _SELF_TWO and len(args) == 2:
        a = dotted(args[0])
        b = dotted(args[1]) if last in ("cdist", "pairwise_distance") else _transposed(args[1])
        return a if a and a == b else None
    return None


def _ranking(node: ast.AST, matrix: str) -> ast.Call | None:
    """The ranking call over ``matrix``'s rows that ``node`` is (or holds), else None."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call) or not isinstance(sub.func, ast.Attribute) or sub.func.attr not in _RANK:
            continue
        owner = dotted(sub.func.value)
        target = sub.args[0] if owner in ("torch", "np", "numpy") and sub.args else sub.func.value
        if isinstance(target, ast.UnaryOp):
            target = target.operand
        if dotted(target) == matrix:
            return sub
    return None


def _skips_first(sub: ast.Subscript) -> bool:
    """``[:, 1:]``, ``[1:]`` or ``[:, 1]``: the ranking read past its first column."""
    row = isinstance(sub.slice, ast.Tuple) and bool(sub.slice.elts)
    sl = sub.slice.elts[-1] if row else sub.slice  # type: ignore[attr-defined]
    if row and isinstance(sl, ast.Constant) and sl.value == 1:
        return True
    return isinstance(sl, ast.Slice) and isinstance(sl.lower, ast.Constant) and sl.lower.value == 1


def _drops_first(ix: FileIndex, call: ast.Call) -> bool:
    """The ranking's result is cut past its first column (``[:, 1:]``, ``[1:]``)."""
    cur: ast.AST = call
    for anc in ix.ancestors(call):
        if isinstance(anc, ast.stmt):
            break
        if isinstance(anc, ast.Subscript) and anc.value is cur and _skips_first(anc):
            return True
        cur = anc
    return False


def _label_compare(ix: FileIndex, scope_nodes: list[ast.AST], ranked: set[str]) -> ast.Compare | None:
    """A comparison ``==`` of labels looked up by the ranked indices with labels."""
    for node in scope_nodes:
        if not isinstance(node, ast.Compare) or not any(isinstance(op, (ast.Eq, ast.In)) for op in node.ops):
            continue
        for side in [node.left] + node.comparators:
            for sub in ast.walk(side):
                if isinstance(sub, ast.Subscript) and dotted(sub.value) and \
                        set(tokens(dotted(sub.value) or "")) & _LABELS and names_in(sub.slice) & ranked:
                    return node
    return None


def query_in_gallery(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for queries ranked against a gallery that holds them."""
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        own = self_matrix(node.value)
        if own is None:
            continue
        matrix = node.targets[0].id
        scope = ix.enclosing_function(node)
        nodes = ix.scope_nodes(scope if scope is not None else ix.tree)
        stmts = [n for n in nodes if isinstance(n, ast.stmt) and n is not node and matrix in names_in(n)
                 and not isinstance(n, (ast.For, ast.While, ast.If, ast.With, ast.Try))]
        rankings = [(s, _ranking(s, matrix)) for s in stmts]
        if not rankings or any(r is None for _, r in rankings):
            continue  # the matrix is bound again, or touched by something that is no ranking: a diagonal mask?
        if any(_drops_first(ix, r) or _asks_one_more(r) for _, r in rankings if r is not None):
            continue
        ranked: set[str] = set()
        for stmt, _ in rankings:
            if isinstance(stmt, ast.Assign):
                ranked |= {e.id for t in stmt.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
        ranked |= {e.id for n in nodes if isinstance(n, ast.Assign) and names_in(n.value) & ranked
                   for t in n.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
        if any(isinstance(n, ast.Subscript) and dotted(n.value) in ranked and _skips_first(n) for n in nodes):
            continue  # the self match cut from the ranked indices afterwards
        compare = _label_compare(ix, nodes, ranked) if ranked else None
        if compare is None:
            continue
        stmt, call = rankings[0]
        yield Hit("disjoint-sets-overlap", node.value,
                  f"`{matrix} = {ix.segment(node.value)}` compares `{own}` with itself, and `{ix.segment(call)}` "
                  f"(line {call.lineno}) ranks every row's candidates with the query itself among them; the labels "
                  f"of the ranking are scored at line {compare.lineno}: each sample is its own nearest neighbour, "
                  "so its first match is itself, of its own label, and recall@k / precision@k / nearest-neighbour "
                  "accuracy read near perfect whatever the embedding",
                  fix=f"exclude each query from its own candidates before ranking: {matrix}.fill_diagonal_("
                      f"float('-inf')) for similarities (float('inf') for distances), or drop the first column "
                      "of the ranking")


def _asks_one_more(call: ast.Call) -> bool:
    """``topk(k + 1)``: one more neighbour than kept, the self match cut afterwards."""
    k = call.args[1] if dotted(call.func.value if isinstance(call.func, ast.Attribute) else call.func) == "torch" \
        and len(call.args) > 1 else (call.args[0] if call.args else kwarg(call, "k"))
    return isinstance(k, ast.BinOp) and isinstance(k.op, ast.Add) and isinstance(k.right, ast.Constant) \
        and k.right.value == 1


def _plus_one(node: ast.AST | None) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Constant) \
        and node.right.value == 1


def _index_of(ix: FileIndex, owner: str, scope_nodes: list[ast.AST]) -> str | None:
    """The set a neighbour index was built on: ``NearestNeighbors(...).fit(X)`` bound to ``owner``, or
    ``owner.fit(X)`` / ``owner.add(X)`` (a faiss index) called in the scope."""
    found: set[str] = set()
    for node in scope_nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("fit", "add") and dotted(node.args[0]):
            holder = node.func.value
            if dotted(holder) == owner:
                found.add(dotted(node.args[0]) or "")
            elif isinstance(holder, ast.Call) and isinstance(ix.parents.get(node), ast.Assign) and \
                    any(dotted(t) == owner for t in ix.parents[node].targets):  # type: ignore[attr-defined]
                found.add(dotted(node.args[0]) or "")
    return found.pop() if len(found) == 1 else None


def neighbours_of_themselves(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for a neighbour index searched with the very set it holds
    (scikit-learn's ``kneighbors(X)`` after ``fit(X)``, faiss's ``search(X, k)`` after ``add(X)``), the
    neighbours' labels scored."""
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        call = node.value
        if not isinstance(call.func, ast.Attribute) or call.func.attr not in ("kneighbors", "search") \
                or not call.args or not dotted(call.func.value):
            continue
        k = call.args[1] if len(call.args) > 1 else kwarg(call, "n_neighbors") or kwarg(call, "k")
        if _plus_one(k):
            continue
        scope = ix.enclosing_function(node)
        nodes = ix.scope_nodes(scope if scope is not None else ix.tree)
        held = _index_of(ix, dotted(call.func.value) or "", nodes)
        if held is None or held != dotted(call.args[0]):
            continue
        ranked = {e.id for t in node.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
        ranked |= {e.id for n in nodes if isinstance(n, ast.Assign) and names_in(n.value) & ranked
                   for t in n.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
        if any(isinstance(n, ast.Subscript) and dotted(n.value) in ranked and _skips_first(n) for n in nodes):
            continue
        compare = _label_compare(ix, nodes, ranked)
        if compare is None:
            continue
        yield Hit("disjoint-sets-overlap", call,
                  f"`{ix.segment(call)}` searches the neighbour index built on `{held}` with `{held}` itself; the "
                  f"labels of the neighbours are scored at line {compare.lineno}: each sample is its own nearest "
                  "neighbour (distance 0), so its first match is itself, of its own label, and the nearest-"
                  "neighbour accuracy or recall@k reads near perfect whatever the embedding",
                  fix="ask for one more neighbour and drop the first column (kneighbors(X, k + 1)[1][:, 1:]), or "
                      "call kneighbors() without X (scikit-learn then leaves each point out of its own neighbours)")
