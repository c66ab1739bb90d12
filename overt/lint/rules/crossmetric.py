"""A value named after one confusion-count metric computed by a function named after another (part of
OVT824 ``metric-off-definition``).

Precision, recall, specificity, F1, IoU and accuracy are different numbers of the same confusion counts.  A
value the code names (or logs) as one of them -- an assignment target, a label, a dict key, a keyword --
whose value is a call of a function named after another of them (``class_recalls = [self.precision(c) for
c in classes]``, ``val_recall = precision_score(y, p)``, ``self.recall = torchmetrics.Precision(...)``)
reports that other metric under the first one's name: a macro F-score built from it is the macro precision
(flairNLP/flair#417).

Proven from the code: each side names exactly one metric (the countformula rule's words: synonyms such as
recall/sensitivity/TPR, F1/Dice, IoU/Jaccard are one metric; names that qualify a metric -- ``best``,
``macro``, ``at_k``, ``curve``, ``loss`` -- name none), and the value is the call itself, a comprehension of
it, or it under an aggregate (``np.mean``, ``sum``, ``float``, ``.item()``).  Silent where the two can be one
number: a call given ``pos_label``/``labels``/``pos``/``positive`` (the recall of the negative class is the
specificity), accuracy against another metric with ``average=`` (micro-averaged recall is the accuracy),
balanced accuracy (the macro recall).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit
from overt.lint.rules.countformula import _label_metric, _labelled, metric_of

#: plural words of the metrics, as the singular the countformula rule knows
_SINGULAR = {"recalls": "recall", "precisions": "precision", "accuracies": "accuracy", "accs": "acc",
             "ious": "iou", "dices": "dice", "f1s": "f1", "specificities": "specificity",
             "sensitivities": "sensitivity", "fscores": "fscore", "jaccards": "jaccard"}
#: calls that keep the metric of their argument
_AGGREGATE = frozenset({"mean", "sum", "float", "np.mean", "numpy.mean", "torch.mean", "statistics.mean", "np.array",
                        "np.asarray", "torch.tensor", "torch.stack", "list", "tuple", "round", "np.nanmean",
                        "item", "tolist", "cpu", "numpy", "detach"})
#: keywords that pick the class a rate is taken of (the recall of class 0 is the specificity)
_POSITIVE = frozenset({"pos_label", "labels", "pos", "positive", "positive_class", "label", "cls", "class_id"})


def _named(label: str) -> str | None:
    """The one metric a label names, plurals read as their singular (``class_recalls``: the recall)."""
    return _label_metric(re.sub(r"[A-Za-z0-9]+", lambda m: _SINGULAR.get(m.group(0).lower(), m.group(0)), label))


def _metric_call(node: ast.AST) -> ast.Call | None:
    """The call of a metric-named function that ``node`` is (through aggregates and comprehensions)."""
    for _ in range(6):
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            node = node.elt
            continue
        if not isinstance(node, ast.Call):
            return None
        name = dotted(node.func) or ""
        short = node.func.attr if isinstance(node.func, ast.Attribute) else name
        if name in _AGGREGATE or (isinstance(node.func, ast.Attribute) and short in _AGGREGATE
                                  and not node.args):
            inner = node.args[0] if name in _AGGREGATE and node.args else (
                node.func.value if isinstance(node.func, ast.Attribute) else None)
            if inner is None:
                return None
            node = inner
            continue
        if name == "map" and node.args:
            node = ast.Call(func=node.args[0], args=[], keywords=[])
            ast.copy_location(node, node.func)
        return node if name or isinstance(node.func, ast.Name) else None
    return None


def crossed_metrics(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for a value named after one metric computed by another's function."""
    seen: set[int] = set()
    for label, value, where in _labelled(ix):
        claimed = _named(label)
        if claimed is None:
            continue
        call = _metric_call(value)
        if call is None or id(call) in seen:
            continue
        func = dotted(call.func)
        if not func:
            continue
        computed = metric_of(func.rsplit(".", 1)[-1])
        if computed is None or computed == claimed or "balanced accuracy" in (claimed, computed):
            continue
        keys = {kw.arg for kw in call.keywords if kw.arg}
        if keys & _POSITIVE or any(kw.arg is None for kw in call.keywords):
            continue
        if "accuracy" in (claimed, computed) and "average" in keys:
            continue
        seen.add(id(call))
        shown = label.strip().rstrip(":=").strip() or claimed
        yield Hit("metric-off-definition", where,
                  f"`{ix.segment(value)}` is reported as the {claimed} (`{shown}`), but it is computed by "
                  f"`{func}()`, a function named for the {computed}: the two are different numbers of the same "
                  f"confusion counts, so every result built from this value (a macro average, an F-score of it) "
                  f"holds the {computed} under the {claimed}'s name",
                  fix=f"call the {claimed}'s function here (or rename the value if the {computed} is meant); check "
                      "the result on counts whose precision and recall differ")
