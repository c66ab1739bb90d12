"""scikit-learn metrics given ``(predictions, labels)`` (OVT806 ``metric-arguments-swapped``, issue 33).

scikit-learn's classification metrics take ``(y_true, y_pred)``.  For the symmetric ones (accuracy,
Matthews, Cohen's kappa) the order does not matter; for precision, recall, F-scores, balanced accuracy,
the confusion matrix and the classification report it does: swapped, precision is reported as recall
and recall as precision, the per-class supports (and so the weighted averages) count predictions, and
the confusion matrix is transposed.

The rule: a call to one of those ``sklearn.metrics`` functions whose ``y_true`` (first positional or
keyword) is provably predictions and whose ``y_pred`` is provably labels.  Predictions: a value bound
(one hop) from ``.argmax(...)``, ``.predict(...)``, ``torch.max(...)[1]`` / ``.max(...)[1]``, a
threshold of a model's output or of a sigmoid, or a name whose words say prediction (``preds``,
``y_pred``, ``y_hat``, ``all_predictions``) and not label.  Labels: a name whose words say label,
target, truth (``labels``, ``y_true``, ``targets``, ``gt``, ``y``, ``y_test``) and not prediction.
Anything else (``a``, ``b``, ``out``) stays silent, and so does ``f1_score`` unless it averages with
``average="weighted"`` (the only F1 the order changes).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, has_star_kwargs, kwarg, tokens
from overt.lint.rules.base import Hit, rule

#: sklearn.metrics functions with a (y_true, y_pred) signature that is not symmetric
_ASYMMETRIC = frozenset({"precision_score", "recall_score", "f1_score", "fbeta_score",
                         "precision_recall_fscore_support", "confusion_matrix", "multilabel_confusion_matrix",
                         "classification_report", "balanced_accuracy_score"})
_EFFECT = {
    "precision_score": "precision and recall trade places (the precision computed is the recall and the recall "
                       "the precision, per class and on average), and supports count predictions",
    "f1_score": "the per-class F1 is unchanged but the supports that weight the average count predictions, so "
                "the weighted F1 is another number",
    "confusion_matrix": "the matrix is transposed: its rows are the predictions and its columns the labels",
    "multilabel_confusion_matrix": "each matrix is transposed: false positives and false negatives trade places",
    "balanced_accuracy_score": "it averages the per-class precision instead of the recall",
}
_PRED_WORDS = frozenset({"pred", "preds", "prediction", "predictions", "predicted", "hat", "yhat", "ypred"})
_LABEL_WORDS = frozenset({"label", "labels", "target", "targets", "true", "truth", "gt", "ytrue", "groundtruth"})
_SCORE_WORDS = frozenset({"prob", "probs", "score", "scores", "logit", "logits", "out", "output", "outputs"})
_LABEL_NAMES = frozenset({"y", "ys", "y_test", "y_val", "y_valid", "y_eval", "y_train", "y_dev", "y_batch"})
_KEEP = frozenset({"numpy", "cpu", "tolist", "detach", "int", "long", "float", "flatten", "ravel", "squeeze",
                   "view", "reshape", "astype", "to", "cuda"})


def _strip(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP:
        node = node.func.value
    if isinstance(node, ast.Call) and dotted(node.func) in ("np.array", "np.asarray", "numpy.array",
                                                            "np.concatenate", "torch.cat") and node.args:
        node = node.args[0]
    return node


def _words(node: ast.AST) -> list[str]:
    name = dotted(node)
    return tokens(name) if name else []


def _named(node: ast.AST) -> str | None:
    """'pred' or 'label' when the name's words say so, and only one of the two."""
    name = dotted(node)
    if name is None:
        return None
    words = set(_words(node))
    pred, label = bool(words & _PRED_WORDS), bool(words & _LABEL_WORDS) or name.rsplit(".", 1)[-1] in _LABEL_NAMES
    if pred and not label:
        return "pred"
    if label and not pred:
        return "label"
    return None


def _labelish(node: ast.AST) -> bool:
    """A name that may hold one-hot labels (``y_onehot``, ``Y_test``, ``targets``) and says nothing of scores."""
    words = set(_words(node))
    return bool(words & (_LABEL_WORDS | {"y", "onehot"})) and not words & (_PRED_WORDS | _SCORE_WORDS)


def _bound(ix: FileIndex, node: ast.Name) -> ast.AST | None:
    scope = ix.enclosing_function(node) or ix.tree
    found = [n for n in ix.scope_nodes(scope) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == node.id]
    return found[0].value if len(found) == 1 else None


def _computed_prediction(node: ast.AST) -> str | None:
    """How ``node`` computes predictions from scores, or None."""
    node = _strip(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("argmax",
                                                                                                  "predict"):
        operand = node.args[0] if node.func.attr == "argmax" and dotted(node.func.value) in (
            "np", "numpy", "torch") and node.args else node.func.value
        if node.func.attr == "argmax" and _labelish(_strip(operand)):
            return None  # one-hot labels made class indices: labels, not predictions
        return f"{node.func.attr}(...)"
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 1:
        inner = node.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "max":
            return "max(...)[1]"
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Gt, ast.GtE)):
        left = _strip(node.left)
        if isinstance(left, ast.Call) and (dotted(left.func) or "").rsplit(".", 1)[-1] == "sigmoid":
            return "a thresholded sigmoid"
    return None


def _role(ix: FileIndex, node: ast.AST | None) -> tuple[str, str] | None:
    """('pred' | 'label', why) when the argument is provably one of the two."""
    if node is None:
        return None
    node = _strip(node)
    how = _computed_prediction(node)
    if how:
        return "pred", f"computed by {how}"
    if isinstance(node, ast.Name):
        value = _bound(ix, node)
        if value is not None:
            how = _computed_prediction(value)
            if how:
                return "pred", f"`{node.id}` is computed by {how} (line {value.lineno})"
    kind = _named(node)
    if kind:
        return kind, f"`{ast.unparse(node)}` is named as {'predictions' if kind == 'pred' else 'labels'}"
    return None


@rule("metric-arguments-swapped")
def metric_arguments_swapped(ix: FileIndex) -> Iterator[Hit]:
    """``precision_recall_fscore_support(y_pred, y_true)``: precision and recall trade places
    (issue 33, voyazici/orderless-rnn-classification#5)."""
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        last = q.rsplit(".", 1)[-1]
        if not q.startswith("sklearn.metrics") or last not in _ASYMMETRIC or has_star_kwargs(call):
            continue
        if any(isinstance(a, ast.Starred) for a in call.args):
            continue
        average = kwarg(call, "average")
        if last == "f1_score" and not (isinstance(average, ast.Constant) and average.value == "weighted"):
            continue  # F1 per class, micro, macro and per sample are symmetric: the order changes nothing
        true = kwarg(call, "y_true") if kwarg(call, "y_true") is not None else (call.args[0] if call.args else None)
        pred = kwarg(call, "y_pred") if kwarg(call, "y_pred") is not None else (
            call.args[1] if len(call.args) > 1 else None)
        first, second = _role(ix, true), _role(ix, pred)
        if not (first and second and first[0] == "pred" and second[0] == "label"):
            continue
        yield Hit("metric-arguments-swapped", true,
                  f"{last} takes (y_true, y_pred), but its y_true is the predictions ({first[1]}) and its y_pred "
                  f"the labels ({second[1]}): {_EFFECT.get(last, _EFFECT['precision_score'])}",
                  fix=f"pass the labels first: {last}({ast.unparse(pred)}, {ast.unparse(true)}, ...)")
