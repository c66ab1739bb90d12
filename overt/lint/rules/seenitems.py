"""Top-N recommendations ranked over the items each user trained on (part of OVT542 ``disjoint-sets-overlap``).

A top-N evaluation scores the items a user has not interacted with in training: the held-out items the
metric looks for are disjoint from the training ones, and a fitted model scores the training items highest.
Ranked without excluding them, they fill the top of every list and push the held-out items out of the top N,
so recall and NDCG read far below what the model does (PreferredAI/cornac#483: "the interactive items in
trainset are not removed during the evaluation phase").

The detector proves each part from the code: a ``topk`` (``S.topk(K, dim=1)``, ``torch.topk(S, K, dim=1)``) or a
descending ``argsort`` cut to its first columns (``np.argsort(-S, axis=1)[:, :K]``, ``S.argsort(dim=1,
descending=True)[:, :K]``) of a score matrix whose top indices are looked up in a held-out interaction matrix
``H`` (``H.gather(1, top)``, ``torch.gather(H, 1, top)``, ``np.take_along_axis(H, top, axis=1)``,
``H[rows, top]``); a training interaction matrix ``T``
(named for training, seen items or history) that is provably disjoint from ``H`` -- filled from the two
halves of one draw (``T[r, chosen[:, k:]] = True``, ``H[r, chosen[:, :k]] = True``) or built as
``... & ~H`` (or ``H`` as ``... & ~T``); and no statement of that function that touches both the scores and
``T`` (``S[T] = -inf``, ``S.masked_fill_(T, ...)``, ``S - 1e9 * T``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg, names_in, tokens
from overt.lint.rules.base import Hit

_COMPOUND = (ast.For, ast.While, ast.If, ast.With, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef)
_TRAIN_WORDS = frozenset({"train", "training", "seen", "history", "observed", "interacted"})


def _topk(ix: FileIndex, node: ast.AST) -> str | None:
    """The score matrix's name when ``node`` is its ``topk`` over items (its indices, or the call itself)."""
    if isinstance(node, ast.Attribute) and node.attr == "indices":
        node = node.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 1:
        node = node.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2:
        return _argsorted(node.value)  # argsort(...)[:, :K]
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or node.func.attr != "topk":
        return None
    owner = node.func.value
    if dotted(owner) == "torch" and node.args:
        return dotted(node.args[0])
    return dotted(owner)


def _argsorted(node: ast.AST) -> str | None:
    """The scores' name for a descending ``argsort`` over items: ``np.argsort(-S, axis=1)``,
    ``torch.argsort(S, dim=1, descending=True)``, ``S.argsort(dim=1, descending=True)``, ``np.argsort(S)[:, ::-1]``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and \
            ast.unparse(node.slice).replace(" ", "") == ":,::-1" and isinstance(node.value, ast.Call):
        call, flipped = node.value, True
    elif isinstance(node, ast.Call):
        call, flipped = node, False
    else:
        return None
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "argsort"):
        return None
    owner = dotted(call.func.value)
    scores = call.args[0] if owner in ("np", "numpy", "torch") and call.args else call.func.value
    descending = kwarg(call, "descending")
    negated = isinstance(scores, ast.UnaryOp) and isinstance(scores.op, ast.USub)
    if not (flipped or negated or (descending is not None and is_const(descending, True))):
        return None
    return dotted(scores.operand if negated else scores)


def _tops(ix: FileIndex) -> list[tuple[ast.Assign, str, str]]:
    """(assignment, the top indices' name, the scores' name)."""
    out = []
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        scores = _topk(ix, value)
        if scores is None:
            continue
        if isinstance(target, ast.Name) and (isinstance(value, ast.Attribute) or isinstance(value, ast.Subscript)):
            out.append((node, target.id, scores))
        elif isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name) \
                and isinstance(value, ast.Call):
            out.append((node, target.elts[1].id, scores))
    return out


def _looked_up(ix: FileIndex, top: str, scope: ast.AST | None) -> tuple[str, ast.AST] | None:
    """(the held-out matrix, where) that ``top``'s indices are looked up in."""
    for node in ix.scope_nodes(scope) if scope is not None else ast.walk(ix.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "take_along_axis" \
                and len(node.args) >= 2 and dotted(node.args[1]) == top and dotted(node.args[0]):
            return dotted(node.args[0]) or "", node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "gather":
            args = node.args
            if dotted(node.func.value) == "torch" and len(args) == 3 and dotted(args[2]) == top:
                return dotted(args[0]) or "", node
            if len(args) == 2 and dotted(args[1]) == top and dotted(node.func.value):
                return dotted(node.func.value) or "", node
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and isinstance(node.ctx, ast.Load) \
                and any(dotted(e) == top for e in node.slice.elts) and dotted(node.value):
            return dotted(node.value) or "", node
    return None


def _filled(ix: FileIndex, name: str) -> list[ast.AST]:
    """The column indices of ``name[rows, cols] = ...`` assignments."""
    out = []
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and dotted(t.value) == name and isinstance(t.slice, ast.Tuple) \
                        and len(t.slice.elts) == 2:
                    out.append(t.slice.elts[1])
    return out


def _halves(a: ast.AST, b: ast.AST) -> bool:
    """``X[:, :k]`` and ``X[:, k:]`` (either order) of one ``X``."""
    def cut(n: ast.AST) -> tuple[str, str, str] | None:
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) and len(n.slice.elts) == 2:
            sl = n.slice.elts[1]
            if isinstance(sl, ast.Slice) and sl.step is None and (sl.lower is None) != (sl.upper is None):
                bound = sl.upper if sl.lower is None else sl.lower
                return dotted(n.value) or "", ast.unparse(bound), "head" if sl.lower is None else "tail"
        return None
    ca, cb = cut(a), cut(b)
    return bool(ca and cb and ca[0] and ca[:2] == cb[:2] and ca[2] != cb[2])


def _excludes(ix: FileIndex, name: str, other: str) -> bool:
    """``name = ... & ~other``."""
    for value in ix.assigns.get(name, []):
        for sub in ast.walk(value):
            if isinstance(sub, ast.UnaryOp) and isinstance(sub.op, ast.Invert) and dotted(sub.operand) == other:
                return True
    return False


def _disjoint_train(ix: FileIndex, held: str) -> str | None:
    """A training interaction matrix provably disjoint from ``held``."""
    negated = {dotted(sub.operand) for value in ix.assigns.get(held, []) for sub in ast.walk(value)
               if isinstance(sub, ast.UnaryOp) and isinstance(sub.op, ast.Invert) and dotted(sub.operand)}
    for name in list(ix.assigns) + sorted(negated - set(ix.assigns)):
        if "." in name or name == held or not set(tokens(name)) & _TRAIN_WORDS:
            continue
        if _excludes(ix, name, held) or _excludes(ix, held, name):
            return name
        if any(_halves(a, b) for a in _filled(ix, name) for b in _filled(ix, held)):
            return name
    return None


def _masked(ix: FileIndex, scores: str, train: str, scope: ast.AST | None) -> bool:
    """A statement of the scope that touches both the scores and the training matrix."""
    for node in ix.scope_nodes(scope) if scope is not None else ast.walk(ix.tree):
        if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND) and {scores, train} <= names_in(node):
            return True
    return False


def seen_items_ranked(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for a top-N ranking over the users' training items."""
    for assign, top, scores in _tops(ix):
        scope = ix.enclosing_function(assign)
        found = _looked_up(ix, top, scope)
        if found is None:
            continue
        held, where = found
        train = _disjoint_train(ix, held)
        if train is None or _masked(ix, scores, train, scope):
            continue
        yield Hit("disjoint-sets-overlap", assign.value,
                  f"`{ix.segment(assign.value)}` ranks every item for each user, the items of `{train}` (the "
                  f"training interactions) among them, and the hits are looked up in `{held}` (line {where.lineno}), "
                  f"which holds none of them: a fitted model scores the training items highest, they fill the top "
                  f"of every list and push out the held-out items the metric looks for, so the metric reads far "
                  f"below the model's",
                  fix=f"exclude the training items before ranking: {scores}[{train}] = float('-inf') (or "
                      f"{scores}.masked_fill({train}, float('-inf'))), then take the top k")
