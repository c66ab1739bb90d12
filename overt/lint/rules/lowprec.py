"""Scores squashed in half precision (OVT814 ``scores-squashed-in-low-precision``, issue 33).

A sigmoid or softmax saturates: its confident outputs all lie within a hair of 1.  bfloat16
keeps 8 bits of mantissa, so between 0.5 and 1 it has 128 values, spaced 0.004 apart (float16: 1024):
computed in that precision, the scores of every confident candidate round to the same few numbers,
and a ranking, a top-k, an AUC or a threshold falls back on arbitrary tie-breaking.  Casting the
result back up to float32 recovers nothing (huggingface/sentence-transformers#3893: "the reduced
mantissa coarsely buckets the (0, 1) probability range, so distinct query-document relevance scores
collapse into spurious ties"; reviewer: "Once sigmoid has run in bfloat16, the saturation damage is
unrecoverable").

The rule: ``sigmoid``/``softmax`` (torch, ``F``, or the tensor method) applied to an explicit cast down
(``x.to(torch.bfloat16)``, ``x.half()``, ``x.bfloat16()``, ``x.to(dtype=torch.float16)``,
``x.type(torch.half)``) whose result is cast back up (``.float()``, ``.double()``,
``.to(torch.float32)``), in the same expression or through the name it is assigned to, or is
ranked (``argmax``, ``topk``, ``sort``, ``argsort``, ``roc_auc_score``, ``average_precision_score``).
Quiet on an activation of a tensor that is low-precision without an explicit cast (a half model's
outputs: the guards and the author chose that precision), and on a cast up before the activation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_LOW = {"bfloat16", "float16", "half"}
_HIGH = {"float32", "float", "float64", "double"}
_SQUASH = {"sigmoid", "softmax"}
_RANKS = {"argmax", "topk", "sort", "argsort", "roc_auc_score", "average_precision_score", "ndcg_score",
          "kthvalue", "searchsorted"}


def _dtype_name(node: ast.AST | None) -> str | None:
    name = dotted(node) if node is not None else None
    return name.rsplit(".", 1)[-1] if name else None


def _cast(node: ast.AST) -> tuple[str, ast.AST] | None:
    """('low' | 'high', the tensor cast) when ``node`` is an explicit cast."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    attr = node.func.attr
    if attr in ("half", "bfloat16") and not node.args:
        return "low", node.func.value
    if attr in ("float", "double") and not node.args:
        return "high", node.func.value
    if attr in ("to", "type"):
        target = node.args[0] if node.args else kwarg(node, "dtype")
        name = _dtype_name(target)
        if name in _LOW:
            return "low", node.func.value
        if name in _HIGH and (dotted(target) or "").startswith(("torch.", "np.")):
            return "high", node.func.value
    return None


def _squash_of_low(node: ast.AST) -> ast.Call | None:
    """``node`` when it is a sigmoid/softmax of an explicit cast down."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _SQUASH:
        q = dotted(func) or ""
        head = q.split(".")[0]
        arg = node.args[0] if head in ("torch", "F", "nn", "functional") and node.args else func.value
        cast = _cast(arg)
        if cast and cast[0] == "low":
            return node
    if isinstance(func, ast.Name) and func.id in _SQUASH and node.args:
        cast = _cast(node.args[0])
        if cast and cast[0] == "low":
            return node
    return None


def _used_high_or_ranked(ix: FileIndex, node: ast.AST) -> str | None:
    """How the squashed value is used: 'cast back up' or 'ranked by argmax'; None when neither."""
    parent = ix.parents.get(node)
    if isinstance(parent, ast.Attribute):  # node.float(): the call is the attribute's parent
        cast = _cast(ix.parents.get(parent)) if ix.parents.get(parent) is not None else None
        if cast and cast[0] == "high":
            return "cast back up"
    if isinstance(parent, ast.Attribute) and parent.attr in _RANKS:
        return f"ranked by {parent.attr}"
    ranker = (dotted(parent.func) or "").rsplit(".", 1)[-1] if isinstance(parent, ast.Call) else ""
    if isinstance(parent, ast.Call) and node in parent.args and ranker in _RANKS:
        return f"ranked by {dotted(parent.func)}"
    return None


def _assigned_name(ix: FileIndex, node: ast.AST) -> tuple[str, ast.AST] | None:
    parent = ix.parents.get(node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return parent.targets[0].id, parent
    return None


def _scope_nodes(ix: FileIndex, stmt: ast.AST) -> Iterator[ast.AST]:
    node = stmt
    while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        node = ix.parents.get(node)
    yield from ast.walk(node if node is not None else ix.tree)


@rule("scores-squashed-in-low-precision")
def scores_squashed_in_low_precision(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        squash = _squash_of_low(call)
        if squash is None:
            continue
        use = _used_high_or_ranked(ix, squash)
        if use is None:
            named = _assigned_name(ix, squash)
            if named is not None:
                name, stmt = named
                for sub in _scope_nodes(ix, stmt):
                    if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load) \
                            and getattr(sub, "lineno", 0) >= stmt.lineno:
                        use = _used_high_or_ranked(ix, sub)
                        if use:
                            use = f"{use} at line {sub.lineno}"
                            break
        if use is None:
            continue
        fn = squash.func.attr if isinstance(squash.func, ast.Attribute) else squash.func.id
        yield Hit("scores-squashed-in-low-precision", squash,
                  f"`{ix.segment(squash)}` computes the {fn} in half precision and the result is {use}: just below 1 "
                  "bfloat16 keeps values 0.004 apart (float16 0.0005), so distinct confident scores round to "
                  "the same number, rankings, top-k and AUC fall back on arbitrary tie-breaking, and casting up "
                  "afterwards recovers nothing",
                  fix=f"cast up before the activation: torch.{fn}(logits.float()) (rank the logits themselves where "
                  "only the order matters)")
