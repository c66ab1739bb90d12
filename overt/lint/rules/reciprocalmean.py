"""A mean reciprocal rank computed as the reciprocal of the mean rank (part of OVT824
``metric-off-definition``).

MRR is the mean over queries of ``1 / rank``.  ``1 / mean(rank)`` is another number: never larger (the
harmonic mean is at most the arithmetic one), equal only when every query has the same rank, and one
badly ranked query drags the whole score down (Sujit-O/pykg2vec#96).

Proven from the code: a value named or logged as the MRR (``mrr``, ``mean_reciprocal_rank``, a label or
key ``"MRR"``) is ``1 / M`` (``1.0 / M``, ``M ** -1``, ``torch.reciprocal(M)``, ``len(r) / sum(r)``) where
``M`` is the mean of a name holding ranks (``r.mean()``, ``np.mean(r)``, ``torch.mean(r)``,
``sum(r) / len(r)``) or a name that is the mean rank itself (``mean_rank``, ``mr``).  Silent when the
ranks are reciprocals already (a name with ``reciprocal``/``inv``/``rr``), and for any other formula.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit
from overt.lint.rules.countformula import _labelled

_MEAN = frozenset({"np.mean", "numpy.mean", "torch.mean", "statistics.mean", "mean", "np.average", "np.nanmean"})
_ARRAY = frozenset({"torch.tensor", "torch.as_tensor", "np.asarray", "np.array", "numpy.asarray", "numpy.array",
                    "torch.stack", "torch.cat", "np.concatenate"})
_KEEP = frozenset({"float", "item", "cpu", "detach", "tolist", "numpy"})


def _claims_mrr(label: str) -> bool:
    label = label.strip().rstrip(":=").strip()
    for sep in (",", "|", ";", "(", ")", "\t", "\n", "  ", " "):
        label = label.rsplit(sep, 1)[-1]
    words = set()
    for part in re.split(r"[/.\-]", label):
        words |= set(tokens(part))
    if words & {"loss", "inv", "inverse", "best", "prev", "delta", "diff", "std", "var"}:
        return False
    return "mrr" in words or {"mean", "reciprocal", "rank"} <= words


def _strip(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name == "float" and len(node.args) == 1:
            node = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP and not node.args:
            node = node.func.value
        else:
            break
    return node


def _ranks(node: ast.AST) -> bool:
    """``node`` is a name (or attribute) whose words say it holds ranks, not their reciprocals."""
    node = _strip(node)
    while isinstance(node, ast.Call) and dotted(node.func) in _ARRAY and node.args:
        node = _strip(node.args[0])
    name = dotted(node)
    if not name:
        return False
    words = set(tokens(name))
    return bool(words & {"rank", "ranks", "ranking", "rankings"}) and not words & {"reciprocal", "inv", "rr", "mrr",
                                                                                   "inverse", "recip"}


def _mean_rank(node: ast.AST) -> bool:
    """``node`` is the mean of ranks: a mean of a rank name, sum/len of one, or a name that is the mean rank."""
    node = _strip(node)
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name in _MEAN and node.args and name != "mean":
            return _ranks(node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "mean" and not node.args:
            return _ranks(node.func.value)
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _sum_of_ranks(node.left) and _len_of(node.right)
    name = dotted(node)
    if name:
        words = tokens(name)
        return words[-2:] == ["mean", "rank"] or words[-1:] == ["mr"]
    return False


def _sum_of_ranks(node: ast.AST) -> bool:
    node = _strip(node)
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name in ("sum", "np.sum", "torch.sum", "numpy.sum") and node.args:
            return _ranks(node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "sum" and not node.args:
            return _ranks(node.func.value)
    return False


def _len_of(node: ast.AST) -> bool:
    node = _strip(node)
    if isinstance(node, ast.Call) and dotted(node.func) == "len" and node.args:
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("numel", "size") \
            and not node.args:
        return True
    return isinstance(node, ast.Attribute) and node.attr == "size"


def _reciprocal_of_mean(node: ast.AST) -> bool:
    node = _strip(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        if isinstance(node.left, ast.Constant) and node.left.value in (1, 1.0):
            return _mean_rank(node.right)
        return _len_of(node.left) and _sum_of_ranks(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        exp = node.right
        return isinstance(exp, ast.UnaryOp) and isinstance(exp.op, ast.USub) and isinstance(exp.operand, ast.Constant) \
            and exp.operand.value in (1, 1.0) and _mean_rank(node.left)
    if isinstance(node, ast.Call) and dotted(node.func) in ("torch.reciprocal", "np.reciprocal") and node.args:
        return _mean_rank(node.args[0])
    return False


def reciprocal_of_mean_rank(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for an MRR computed as the reciprocal of the mean rank."""
    seen: set[int] = set()
    for label, value, where in _labelled(ix):
        if id(value) in seen or not _claims_mrr(label) or not _reciprocal_of_mean(value):
            continue
        seen.add(id(value))
        shown = label.strip().rstrip(":=").strip() or "mrr"
        yield Hit("metric-off-definition", where,
                  f"`{ix.segment(value)}` is reported as the mean reciprocal rank (`{shown}`), but it is the "
                  "reciprocal of the mean rank: MRR averages 1 / rank over the queries, and 1 / mean(rank) is never "
                  "larger (equal only when every query has the same rank), so one badly ranked query drags the "
                  "whole score down and the number is not comparable with any published MRR",
                  fix="average the reciprocals: (1.0 / ranks).mean() (or np.mean(1.0 / np.asarray(ranks)))")
