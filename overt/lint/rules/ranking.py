"""A ranking metric given hard labels instead of scores (OVT811 ``ranking-metric-on-labels``, issue 33).

ROC AUC, average precision and the ROC and precision-recall curves measure how well the scores *order*
the samples: every threshold is tried.  Given the thresholded predictions (0 or 1) there is one
threshold left, and the "AUC" is the balanced accuracy at 0.5 (average precision a precision at one
recall): the number no longer measures what its name says, and it moves with the threshold, not with
the model (pyg-team/pytorch_geometric#2248: "use positive link probabilities as input to auc instead
of predicted labels").

The rule: a call to scikit-learn's ``roc_auc_score``, ``average_precision_score``, ``roc_curve`` or
``precision_recall_curve`` (score argument second or ``y_score``/``probas_pred``), or torchmetrics'
functional ``auroc``/``average_precision``/``roc``/``precision_recall_curve`` (and their ``binary_``
forms, and their metric objects' ``update``/call; predictions first or ``preds``), whose score
argument is provably hard labels: a comparison (``prob > 0.5``), ``argmax``, ``max(...)[1]`` or
``.indices``, ``round()`` without decimals, ``where(cond, 1, 0)``, or a classifier's ``predict`` (an
estimator bound in the file to a ``*Classifier``/``LogisticRegression``/``SVC``/naive Bayes class),
written in the call, bound once (one assignment in the same scope) to the name passed, or the only
thing appended to the list passed (``preds.append((p > 0.5).int())``; ``torch.cat(preds)``).  Type
conversions around it (``.float()``, ``.numpy()``, ``.astype(int)``) do not hide it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, has_star_kwargs, kwarg
from overt.lint.rules.base import Hit, rule

_SKLEARN = {"roc_auc_score": "y_score", "average_precision_score": "y_score", "roc_curve": "y_score",
            "precision_recall_curve": "probas_pred"}
_TORCHMETRICS = frozenset({"auroc", "binary_auroc", "average_precision", "binary_average_precision", "roc",
                           "binary_roc", "precision_recall_curve", "binary_precision_recall_curve"})
_TORCHMETRIC_CLASSES = frozenset({"AUROC", "BinaryAUROC", "MulticlassAUROC", "MultilabelAUROC", "AveragePrecision",
                                  "BinaryAveragePrecision", "MulticlassAveragePrecision", "ROC", "BinaryROC",
                                  "PrecisionRecallCurve", "BinaryPrecisionRecallCurve"})
_KEEP = frozenset({"numpy", "cpu", "tolist", "detach", "int", "long", "float", "double", "flatten", "ravel",
                   "squeeze", "view", "reshape", "astype", "to", "cuda", "type", "item"})
_LABEL_WORDS = ("label", "labels", "target", "targets", "onehot", "truth")


def _strip(node: ast.AST) -> ast.AST:
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP:
            node = node.func.value
        elif isinstance(node, ast.Call) and dotted(node.func) in (
                "np.array", "np.asarray", "numpy.array", "numpy.asarray", "torch.tensor", "torch.as_tensor",
                "np.concatenate", "torch.cat", "list") and node.args:
            node = node.args[0]
        else:
            return node


def _one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value in (1, 1.0)


def _zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value in (0, 0.0)


_CLASSIFIERS = frozenset({"LogisticRegression", "SVC", "LinearSVC", "NuSVC", "GaussianNB", "MultinomialNB",
                          "BernoulliNB", "Perceptron", "RidgeClassifierCV", "LinearDiscriminantAnalysis",
                          "QuadraticDiscriminantAnalysis"})


def _classifier(ix: FileIndex | None, receiver: ast.AST) -> str | None:
    """Why ``receiver`` is a classifier (whose ``predict`` returns labels), or None."""
    name = dotted(receiver)
    if ix is None or name is None:
        return None
    for value in ix.assigns.get(name, []):
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "fit":
            value = value.func.value  # RandomForestClassifier().fit(X, y)
        if isinstance(value, ast.Call):
            cls = (ix.qualname(value.func) or "").rsplit(".", 1)[-1]
            if cls.endswith("Classifier") or cls in _CLASSIFIERS:
                return f"`{name}` is a {cls}"
    return None  # a predict_proba elsewhere proves nothing: old Keras models have one and predict probabilities


def _hard(node: ast.AST, ix: FileIndex | None = None) -> str | None:
    """How ``node`` turns scores into hard labels, or None."""
    node = _strip(node)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
            node.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        return f"the threshold `{ast.unparse(node)}`"
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        last = name.rsplit(".", 1)[-1] if name else (node.func.attr if isinstance(node.func, ast.Attribute) else "")
        if last == "argmax":
            operand = node.args[0] if isinstance(node.func, ast.Attribute) and dotted(node.func.value) in (
                "np", "numpy", "torch") and node.args else (
                node.func.value if isinstance(node.func, ast.Attribute) else None)
            words = (dotted(_strip(operand)) or "").lower() if operand is not None else ""
            if any(w in words for w in _LABEL_WORDS):
                return None
            return "argmax (a class index)"
        if last in ("round", "rint", "around"):
            on_method = isinstance(node.func, ast.Attribute) and dotted(node.func.value) not in ("np", "numpy", "torch")
            extra = node.args if on_method else node.args[1:]
            if extra or node.keywords or last == "round" and isinstance(node.func, ast.Name):
                return None  # round(p, 2) keeps most of the order; builtin round() of a scalar is not this
            return f"`{ast.unparse(node)}` (rounded to 0 or 1)"
        if last == "predict" and isinstance(node.func, ast.Attribute):
            why = _classifier(ix, node.func.value)
            return f"a classifier's predict(), which returns class labels ({why})" if why else None
        if last == "where" and len(node.args) == 3 and isinstance(_strip(node.args[0]), ast.Compare) and (
                _one(node.args[1]) and _zero(node.args[2]) or _zero(node.args[1]) and _one(node.args[2])):
            return f"`{ast.unparse(node)}`"
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 1:
        inner = node.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "max" \
                and (inner.args or inner.keywords):
            return "max(...)[1] (a class index)"
    if isinstance(node, ast.Attribute) and node.attr == "indices":
        inner = node.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "max":
            return "max(...).indices (a class index)"
    return None


def _bound(ix: FileIndex, node: ast.Name) -> ast.AST | None:
    scope = ix.enclosing_function(node) or ix.tree
    found = [n for n in ix.scope_nodes(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and any(isinstance(t, ast.Name) and t.id == node.id
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    return found[0].value if len(found) == 1 and isinstance(found[0], ast.Assign) else None


def _collected(ix: FileIndex, name: ast.Name) -> str | None:
    """``name`` is a list filled only with hard labels (``preds.append((p > 0.5).int())``)."""
    scope = ix.enclosing_function(name) or ix.tree
    grows = [n for n in ix.scope_nodes(scope) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("append", "extend") and dotted(n.func.value) == name.id and len(n.args) == 1]
    if not grows:
        return None
    hows = [_hard(g.args[0], ix) for g in grows]
    if not all(hows):
        return None
    return f"`{name.id}` collects {hows[0]} (line {grows[0].lineno})"


def _score_argument(ix: FileIndex, call: ast.Call) -> tuple[str, ast.AST] | None:
    q = ix.qualname(call.func) or ""
    last = q.rsplit(".", 1)[-1]
    if q.startswith("sklearn.metrics") and last in _SKLEARN:
        arg = kwarg(call, _SKLEARN[last])
        return (last, arg if arg is not None else call.args[1]) if arg is not None or len(call.args) > 1 else None
    if q.startswith("torchmetrics") and last in _TORCHMETRICS or _metric_object(ix, call):
        arg = kwarg(call, "preds")
        name = last if q.startswith("torchmetrics") else _metric_object(ix, call)
        return (name, arg if arg is not None else call.args[0]) if arg is not None or call.args else None
    return None


def _metric_object(ix: FileIndex, call: ast.Call) -> str | None:
    """The class name when ``call`` is ``m(preds, target)`` or ``m.update(preds, target)`` on a torchmetrics
    ranking metric object made once in this file (``m = BinaryAUROC()``)."""
    f = call.func
    target = f.value if isinstance(f, ast.Attribute) and f.attr in ("update", "forward") else f
    name = dotted(target)
    values = ix.assigns.get(name, []) if name else []
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None
    q = ix.qualname(values[0].func) or ""
    cls = q.rsplit(".", 1)[-1]
    return cls if q.startswith("torchmetrics") and cls in _TORCHMETRIC_CLASSES else None


@rule("ranking-metric-on-labels")
def ranking_metric_on_labels(ix: FileIndex) -> Iterator[Hit]:
    """``roc_auc_score(y, (prob > 0.5).float())``: the AUC of one threshold (issue 33,
    pyg-team/pytorch_geometric#2248)."""
    for call in ix.calls:
        if has_star_kwargs(call) or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        found = _score_argument(ix, call)
        if found is None:
            continue
        metric, arg = found
        how = _hard(arg, ix)
        shown = ast.unparse(arg)
        core = _strip(arg)
        if how is None and isinstance(core, ast.Name):
            value = _bound(ix, core)
            if value is not None:
                how = _hard(value, ix)
                if how:
                    how = f"`{core.id}` is {how} (line {value.lineno})"
                elif isinstance(_strip(value), ast.Name):
                    core = _strip(value)  # preds = torch.cat(all_preds)
            how = how or _collected(ix, core)
        elif how:
            how = f"it is {how}"
        if how is None:
            continue
        yield Hit("ranking-metric-on-labels", arg,
                  f"{metric} ranks samples by their scores, but its score argument `{shown}` is hard labels "
                  f"({how}): with only hard labels to rank, ROC AUC is the balanced accuracy at that one "
                  f"threshold (average precision a single point of its curve), so the number no longer measures how "
                  f"the model orders positives above negatives",
                  fix="pass the scores (the probabilities or logits of the positive class) before any threshold or "
                      "argmax")
