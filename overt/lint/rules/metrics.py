"""Evaluation code that computes the wrong number (OVT8xx, issue 33).

Five properties every correct metric computation has, checked where the code shows them:

- ``prediction-shape-mismatch``: a prediction compared with labels has the labels' shape.  Lint sees the
  commonest way to lose it: ``argmax()`` with no ``dim`` over a batch of outputs is one flat index into the
  whole batch, and comparing it with the batch's labels scores nothing.
- ``metric-wrong-denominator``: a ratio whose numerator counts samples is divided by a count of samples
  (not by the number of batches: ``len(loader)``), and a sum of per-batch means is divided by the number of
  batches (not by the number of samples: ``len(loader.dataset)``).
- ``metric-wrong-class-score``: a binary ranking metric (ROC AUC, average precision, ROC/PR curves) is given
  the score of the positive class, not column 0 of a two-class probability matrix.
- ``predictions-not-denormalised``: predictions are scored against targets in the units the model was
  trained on (a model trained on standardised targets is scored against raw ones only after the inverse
  transform).
- ``metric-not-reset``: a metric object accumulated over a pass is reset before the next pass (a torchmetrics
  metric computed every epoch without ``reset()`` reports all epochs so far).

Each rule concludes only from what it can prove in the file; where a fact is not visible (the batch size
of a loader passed in as a parameter, what a helper returns), it stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.units import model_calls
from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, has_star_kwargs, kwarg, tokens
from overt.lint.rules.base import Hit, rule

#: methods that keep a value what it is (device moves, dtype casts, host copies)
_KEEP = frozenset({"item", "float", "double", "long", "int", "cpu", "cuda", "to", "detach", "numpy", "half",
                   "squeeze", "flatten", "view", "reshape", "contiguous", "clone", "type", "tolist"})
_EQ_METHODS = frozenset({"eq", "ne", "__eq__"})


def _strip(node: ast.AST) -> ast.AST:
    """``x.float().cpu().item()`` -> ``x``; ``float(x)`` / ``int(x)`` -> ``x``."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP:
            node = node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "float", "int") and len(node.args) == 1:
            node = node.args[0]
        else:
            return node


def _single_value(ix: FileIndex, node: ast.AST) -> ast.AST:
    """A local name assigned exactly once in its scope stands for what it was assigned (one hop)."""
    if not isinstance(node, ast.Name):
        return node
    scope = ix.enclosing_function(node) or ix.tree
    found = [n for n in ix.scope_nodes(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and any(isinstance(t, ast.Name) and t.id == node.id
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if len(found) == 1 and isinstance(found[0], ast.Assign) and len(found[0].targets) == 1:
        return found[0].value
    return node


def _is_comparison(ix: FileIndex, node: ast.AST) -> bool:
    """An element-wise equality test: ``a == b``, ``a != b``, ``a.eq(b)``, ``torch.eq(a, b)``."""
    node = _strip(node)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _EQ_METHODS:
        return True
    return isinstance(node, ast.Call) and (ix.qualname(node.func) or "") in (
        "torch.eq", "torch.ne", "np.equal", "numpy.equal")


def _reduced(node: ast.AST, how: tuple[str, ...]) -> ast.AST | None:
    """The operand of a reduction ``how`` (``x.sum()``, ``torch.sum(x)``, ``np.mean(x)``), else None."""
    node = _strip(node)
    if not isinstance(node, ast.Call) or has_star_kwargs(node):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in how and not node.args and not node.keywords:
        return f.value
    if isinstance(f, ast.Attribute) and f.attr in how and isinstance(f.value, ast.Name) \
            and f.value.id in ("torch", "np", "numpy") and len(node.args) == 1 and not node.keywords:
        return node.args[0]
    return None


# -- metric-wrong-denominator ----------------------------------------------------------------------------

def _sum_kind(ix: FileIndex, value: ast.AST) -> str | None:
    """What one ``acc += value`` adds: "count" (hits summed over the batch's samples), "mean" (a per-batch mean:
    an accuracy averaged over the batch, a mean-reduced loss), or None (unknown)."""
    inner = _reduced(value, ("sum", "count_nonzero"))
    if inner is not None and _is_comparison(ix, _single_value(ix, _strip(inner))):
        return "count"
    inner = _reduced(value, ("mean",))
    if inner is not None and _is_comparison(ix, _single_value(ix, _strip(inner))):
        return "mean"
    core = _strip(value)
    if isinstance(core, ast.Call) and (ix.qualname(core.func) or "").rsplit(".", 1)[-1] == "accuracy_score" \
            and kwarg(core, "normalize") is None:
        return "mean"
    if isinstance(core, ast.Name) and _mean_loss(ix, core):
        return "mean"
    return None


def _mean_loss(ix: FileIndex, name: ast.Name) -> bool:
    """Is ``name`` a loss computed once in its scope by a loss that averages over the batch (no ``reduction``
    given, to the call or to the loss module)?"""
    value = _single_value(ix, name)
    if not isinstance(value, ast.Call) or kwarg(value, "reduction") is not None or has_star_kwargs(value):
        return False
    kind = ix.is_loss_fn(value)
    if kind is None or kind == "unknown":
        return False
    text = dotted(value.func)
    if text in ix.assigns:  # a loss module: its constructor must not set a reduction either
        made = ix.assigns[text]
        return all(isinstance(m, ast.Call) and kwarg(m, "reduction") is None and kwarg(m, "size_average") is None
                   and kwarg(m, "reduce") is None and not has_star_kwargs(m) for m in made)
    return isinstance(value.func, ast.Attribute) and not (dotted(value.func) or "").startswith("self.")


def _loader_batches(ix: FileIndex, name: str) -> bool:
    """Is ``name`` a DataLoader (every assignment in the file) that batches several samples: ``batch_size``
    given and not the literal 1 or None, and no ``batch_sampler``?"""
    made = ix.assigns.get(name, [])
    if not made:
        return False
    for call in made:
        if not (isinstance(call, ast.Call) and ix.call_is(call, "DataLoader")) or has_star_kwargs(call):
            return False
        if kwarg(call, "batch_sampler") is not None:
            return False
        size = kwarg(call, "batch_size") or (call.args[1] if len(call.args) > 1 else None)
        if size is None or (isinstance(size, ast.Constant) and (size.value is None or size.value == 1)):
            return False
    return True


def _counts_batches(ix: FileIndex, name: str) -> bool:
    """Does ``len(name)`` count batches of several samples?  Yes for a DataLoader of the file that batches
    (:func:`_loader_batches`); also for a loader made elsewhere (a parameter, a helper's result), unless the
    file shows it built with ``batch_size=1`` (or none, or a ``batch_sampler``), where batches are samples."""
    if _loader_batches(ix, name):
        return True
    made = ix.assigns.get(name, [])
    if any(isinstance(m, ast.Call) and ix.call_is(m, "DataLoader") for m in made):
        return False
    return _looks_like_loader(ix, name)


def _loop_loader(ix: FileIndex, loop: ast.For) -> tuple[str | None, str | None]:
    """(the loader a ``for`` iterates, the name of its ``enumerate`` index) for ``for b in loader``,
    ``for i, b in enumerate(loader)``, ``for b in tqdm(loader)``."""
    it, index = loop.iter, None
    while isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)) and it.args and \
            (dotted(it.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm", "iter"):
        if (dotted(it.func) or "").endswith("enumerate") and isinstance(loop.target, ast.Tuple) \
                and loop.target.elts and isinstance(loop.target.elts[0], ast.Name):
            index = loop.target.elts[0].id
        it = it.args[0]
    return dotted(it), index


def _per_batch_counter(ix: FileIndex, loop: ast.For, name: str) -> str | None:
    """How a counter ``name`` grows in ``loop``: "batches" (``n += 1``), "samples" (``n += y.size(0)``,
    ``len(y)``, ``y.shape[0]``, ``y.numel()``), else None."""
    kinds = set()
    for n in ix.scope_nodes(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
            v = n.value
            if isinstance(v, ast.Constant) and v.value == 1:
                kinds.add("batches")
            elif _size_of(v):
                kinds.add("samples")
            else:
                return None
    return kinds.pop() if len(kinds) == 1 else None


def _size_of(v: ast.AST) -> bool:
    """``y.size(0)``, ``len(y)``, ``y.shape[0]``, ``x.size()[0]``."""
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "size" \
            and len(v.args) == 1 and isinstance(v.args[0], ast.Constant) and v.args[0].value == 0:
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "len" and len(v.args) == 1:
        return True
    return isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant) and v.slice.value == 0 and (
        (isinstance(v.value, ast.Attribute) and v.value.attr == "shape")
        or (isinstance(v.value, ast.Call) and isinstance(v.value.func, ast.Attribute)
            and v.value.func.attr == "size" and not v.value.args))


def _denominator_kind(ix: FileIndex, den: ast.AST, loop: ast.For, loader: str, index: str | None) -> str | None:
    """"batches" or "samples" when the denominator provably counts one or the other for ``loop``."""
    den = _strip(den)
    if isinstance(den, ast.Name) and den.id not in (index,):
        counted = _per_batch_counter(ix, loop, den.id)
        if counted == "samples" or (counted == "batches" and _counts_batches(ix, loader)):
            return counted
        if counted:
            return None
        den = _single_value(ix, den)
    if isinstance(den, ast.Call) and isinstance(den.func, ast.Name) and den.func.id == "len" and len(den.args) == 1:
        arg = dotted(den.args[0])
        if arg == loader:
            return "batches" if _counts_batches(ix, loader) else None
        if arg == f"{loader}.dataset" or arg == f"{loader}.sampler":
            return "samples"
        made = ix.assigns.get(loader, [])
        if arg and made and all(isinstance(m, ast.Call) and m.args and dotted(m.args[0]) == arg for m in made):
            return "samples"  # len(ds) for the data set the loader was built on
        return None
    if index is not None and isinstance(den, ast.BinOp) and isinstance(den.op, ast.Add) \
            and isinstance(den.left, ast.Name) and den.left.id == index \
            and isinstance(den.right, ast.Constant) and den.right.value == 1:
        return "batches" if _counts_batches(ix, loader) else None
    return None


def _looks_like_loader(ix: FileIndex, name: str) -> bool:
    return name in ix.loaders or any(t in ("loader", "dataloader", "dl") for t in tokens(name))


def _other_loader(ix: FileIndex, den: ast.AST, loader: str) -> str | None:
    """The loader whose batches ``den`` counts (``len(other_loader)``) when it is not ``loader``, the one the
    sum ran over, nor made from it (``active = skip_first_batches(train_loader)``), else None."""
    den = _single_value(ix, _strip(den))
    if not (isinstance(den, ast.Call) and isinstance(den.func, ast.Name) and den.func.id == "len"
            and len(den.args) == 1):
        return None
    other = dotted(den.args[0])
    if not other or other == loader or not _looks_like_loader(ix, other) or not _looks_like_loader(ix, loader):
        return None
    tail = lambda text: text.rsplit(".", 1)[-1]  # noqa: E731
    for a, b in ((loader, other), (other, loader)):
        if any(tail(b) in {tail(dotted(n) or "") for n in ast.walk(v) if isinstance(n, (ast.Name, ast.Attribute))}
               for v in ix.assigns.get(a, [])):
            return None
    return other


def _numerator(node: ast.AST) -> ast.Name | None:
    """The accumulator a ratio divides: ``acc``, ``acc.item()``, ``float(acc)``, ``100 * acc``."""
    node = _strip(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if isinstance(node.left, ast.Constant):
            node = _strip(node.right)
        elif isinstance(node.right, ast.Constant):
            node = _strip(node.left)
    return node if isinstance(node, ast.Name) else None


def _accumulations(ix: FileIndex, scope: ast.AST, name: str, judged: ast.AST) -> list[ast.AugAssign] | None:
    """Every ``name += ...`` of ``scope``, or None when ``name`` is also set to something else than 0
    (``judged``, the division itself, aside)."""
    out = []
    for n in ix.scope_nodes(scope):
        if n is judged:
            continue
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
            if not isinstance(n.op, ast.Add):
                return None
            out.append(n)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names = {e.id for t in targets for e in ast.walk(t) if isinstance(e, ast.Name)}
            if name in names and not _zero(n.value):
                return None
    return out


def _zero(node: ast.AST | None) -> bool:
    node = _strip(node) if node is not None else None
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_zero(e) for e in node.elts)
    if isinstance(node, ast.Constant) and node.value == 0:
        return True
    return isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in ("tensor", "zeros") \
        and (not node.args or isinstance(node.args[0], ast.Constant) and node.args[0].value in (0, 0.0))


@rule("metric-wrong-denominator")
def metric_wrong_denominator(ix: FileIndex) -> Iterator[Hit]:
    """``correct += (pred == y).sum()`` over a loader, then ``correct / len(loader)`` (hits per batch, not an
    accuracy), and the mirror ``acc += (pred == y).float().mean()`` / ``len(loader.dataset)`` (issue 33,
    mlflow-torchserve#57)."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            num, den, at = _numerator(node.left), node.right, node
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div) and isinstance(node.target, ast.Name):
            num, den, at = node.target, node.value, node
        else:
            continue
        if num is None:
            continue
        scope = ix.enclosing_function(node) or ix.tree
        adds = _accumulations(ix, scope, num.id, node)
        if not adds:
            continue
        loops = {id(lp): lp for a in adds for lp in ix.enclosing_loops(a)[:1]}
        if len(loops) != 1:
            continue
        loop = next(iter(loops.values()))
        if not isinstance(loop, ast.For) or ix.enclosing_loops(node)[:1] == [loop] or any(
                a is loop for a in ix.ancestors(node)):
            continue  # the ratio is taken inside the loop it accumulates over: a running value
        loader, index = _loop_loader(ix, loop)
        if loader is None:
            continue
        other = _other_loader(ix, den, loader)
        if other is not None:
            yield Hit("metric-wrong-denominator", at,
                      f"'{num.id}' is summed over the batches of '{loader}' (line {adds[0].lineno}) but divided by "
                      f"the number of batches of '{other}', another loader: the result is not the mean over "
                      f"'{loader}'",
                      fix=f"divide by len({loader})")
            continue
        kinds = {_sum_kind(ix, a.value) for a in adds}
        if len(kinds) != 1 or None in kinds:
            continue
        kind = kinds.pop()
        counts = _denominator_kind(ix, den, loop, loader, index)
        if kind == "count" and counts == "batches":
            yield Hit("metric-wrong-denominator", at,
                      f"'{num.id}' counts correct samples (line {adds[0].lineno}) but is divided by the number of "
                      f"batches of '{loader}': the result is the mean number of hits per batch (up to the batch "
                      f"size), not an accuracy, and it moves with the batch size",
                      fix=f"divide by the number of samples: len({loader}.dataset), or a count grown by "
                          f"y.size(0) in the loop")
        elif kind == "mean" and counts == "samples":
            yield Hit("metric-wrong-denominator", at,
                      f"'{num.id}' adds up one mean per batch (line {adds[0].lineno}) but is divided by the "
                      f"number of samples: the result is the mean divided by the batch size, not a mean",
                      fix=f"divide by the number of batches (len({loader})), or add the per-batch mean "
                          f"multiplied by the batch's size (mean * y.size(0)) before dividing by the samples")


# -- metric-wrong-class-score ----------------------------------------------------------------------------

#: binary ranking metrics: the name -> (position of the labels, position of the scores) in its arguments
_RANKING = {"roc_auc_score": (0, 1), "average_precision_score": (0, 1), "roc_curve": (0, 1),
            "precision_recall_curve": (0, 1), "det_curve": (0, 1), "binary_auroc": (1, 0),
            "binary_average_precision": (1, 0), "binary_roc": (1, 0), "binary_precision_recall_curve": (1, 0)}
_SCORE_KW = ("y_score", "probas_pred", "y_proba", "preds")
_TRUE_KW = ("y_true", "target")


def _column_zero(node: ast.AST) -> ast.AST | None:
    """The matrix of ``m[:, 0]``, ``m[:, :1]``, ``m[:, 0:1]``, ``m[..., 0]`` (through ``.numpy()`` and the like)."""
    node = _strip(node)
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple) or len(node.slice.elts) != 2:
        return None
    first, col = node.slice.elts
    if not ((isinstance(first, ast.Slice) and first.lower is None and first.upper is None and first.step is None)
            or (isinstance(first, ast.Constant) and first.value is Ellipsis)):
        return None
    if isinstance(col, ast.Constant) and col.value == 0 and not isinstance(col.value, bool):
        return node.value
    if isinstance(col, ast.Slice) and col.step is None and (col.lower is None or (
            isinstance(col.lower, ast.Constant) and col.lower.value == 0)) \
            and isinstance(col.upper, ast.Constant) and col.upper.value == 1:
        return node.value
    return None


def _two_class_probs(ix: FileIndex, node: ast.AST, depth: int = 0) -> str | None:
    """Why ``node`` is a matrix of class probabilities whose columns are the classes (a softmax over the
    classes, ``predict_proba``), or None.  A sigmoid's single column is not one: its column 0 is the positive
    class's score."""
    node = _strip(node)
    if depth > 3:
        return None
    if isinstance(node, ast.Call):
        f = node.func
        last = (dotted(f) or "").rsplit(".", 1)[-1] if isinstance(f, (ast.Name, ast.Attribute)) else ""
        if last == "predict_proba":
            return "predict_proba"
        if last == "softmax":
            dim = kwarg(node, "dim") or kwarg(node, "axis")
            args = node.args[1:] if isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and isinstance(
                f.value, ast.Name) and f.value.id in ix.imports) else node.args
            dim = dim if dim is not None else (args[0] if args else None)
            if isinstance(dim, ast.Constant) and dim.value in (1, -1):
                return f"softmax over the classes (line {node.lineno})"
            if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub):
                return f"softmax over the classes (line {node.lineno})"
        if isinstance(f, ast.Name) and f.id in ("np.array", "array"):
            return None
    if isinstance(node, ast.Name):
        value = _single_value(ix, node)
        if value is not node:
            return _two_class_probs(ix, value, depth + 1)
        v = values_for(ix).of(node)
        if v.head == "probs":
            return f"softmax over the classes ({v.origin})"
    return None


def _plain_labels(ix: FileIndex, node: ast.AST | None) -> bool:
    """Labels passed as they are (not ``1 - y``, ``y == k``, ``y[:, 0]``, nor a name assigned from such)."""
    if node is None:
        return False
    node = _strip(node)
    if isinstance(node, ast.Name):
        value = _single_value(ix, node)
        if value is not node:
            return _plain_labels(ix, value)
        return all(not isinstance(_strip(v), (ast.BinOp, ast.Compare, ast.UnaryOp))
                   for v in ix.assigns.get(node.id, []))
    if isinstance(node, ast.Subscript):
        return not isinstance(node.slice, ast.Tuple)
    if isinstance(node, ast.Call):
        last = (dotted(node.func) or "").rsplit(".", 1)[-1]
        return last in ("cat", "concatenate", "array", "tensor", "asarray", "stack", "hstack", "vstack") \
            and bool(node.args) and not isinstance(node.args[0], (ast.BinOp, ast.Compare))
    return isinstance(node, ast.Attribute)


@rule("metric-wrong-class-score")
def metric_wrong_class_score(ix: FileIndex) -> Iterator[Hit]:
    """``roc_auc_score(y, probs[:, 0])`` with ``probs`` a softmax over two classes: the score of class 0 ranks
    the samples for the negative class, so the metric reports one minus the model's AUC (issue 33,
    automl/nanoTabPFN#6)."""
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        last = q.rsplit(".", 1)[-1]
        if last not in _RANKING or has_star_kwargs(call):
            continue
        if last.startswith("binary_") and not q.startswith("torchmetrics"):
            continue
        if not last.startswith("binary_") and not q.startswith("sklearn."):
            continue
        ti, si = _RANKING[last]
        score = next((kwarg(call, k) for k in _SCORE_KW if kwarg(call, k) is not None), None)
        score = score if score is not None else (call.args[si] if len(call.args) > si else None)
        truth = next((kwarg(call, k) for k in _TRUE_KW if kwarg(call, k) is not None), None)
        truth = truth if truth is not None else (call.args[ti] if len(call.args) > ti else None)
        pos = kwarg(call, "pos_label")
        if score is None or (pos is not None and not (isinstance(pos, ast.Constant) and pos.value in (1, True))):
            continue
        matrix = _column_zero(score)
        if matrix is None or not _plain_labels(ix, truth):
            continue
        why = _two_class_probs(ix, matrix)
        if why is None:
            continue
        yield Hit("metric-wrong-class-score", score,
                  f"{last} is given column 0 of {ast.unparse(matrix)} ({why}): the probability of class 0, while "
                  f"the metric takes label 1 as the positive class, so it ranks the samples backwards and reports "
                  f"one minus the model's score",
                  fix=f"pass the positive class's column: {ast.unparse(matrix)}[:, 1]")


# -- prediction-shape-mismatch -----------------------------------------------------------------------------

def _flat_argmax(ix: FileIndex, node: ast.AST) -> ast.Call | None:
    """``x.argmax()`` / ``torch.argmax(x)`` / ``x.argmin()`` with no ``dim``: one index into the flattened
    tensor.  The call, else None."""
    node = _strip(node)
    if not isinstance(node, ast.Call) or has_star_kwargs(node) or any(
            k.arg in ("dim", "axis") for k in node.keywords):
        return None
    f = node.func
    if not isinstance(f, ast.Attribute) or f.attr not in ("argmax", "argmin"):
        return None
    if isinstance(f.value, ast.Name) and f.value.id == "torch":
        return node if len(node.args) == 1 else None
    return node if not node.args else None


def _argmax_operand(node: ast.Call) -> ast.AST:
    f = node.func
    assert isinstance(f, ast.Attribute)
    return node.args[0] if isinstance(f.value, ast.Name) and f.value.id == "torch" else f.value


_ACTIVATIONS = frozenset({"softmax", "log_softmax", "sigmoid"})


def _batched_model_output(ix: FileIndex, node: ast.AST, depth: int = 0) -> str | None:
    """Why ``node`` holds a model's outputs for a batch of several samples, or None: a model called on a slice
    of rows (``model(X[a:b])``) or on a batch drawn from a DataLoader that batches."""
    node = _strip(node)
    if depth > 3:
        return None
    if isinstance(node, ast.Name):
        value = _single_value(ix, node)
        return _batched_model_output(ix, value, depth + 1) if value is not node else None
    if not isinstance(node, ast.Call) or node not in model_calls(ix, ix.statement_of(node)) or not node.args:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ACTIVATIONS:
            on_module = isinstance(node.func.value, ast.Name) and (
                node.func.value.id in ix.imports or node.func.value.id in ("torch", "F"))
            operand = (node.args[0] if node.args else None) if on_module else node.func.value
            return _batched_model_output(ix, operand, depth + 1) if operand is not None else None
        return None
    arg = _strip(node.args[0])
    if isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Slice) and arg.slice.step is None \
            and (arg.slice.lower is not None or arg.slice.upper is not None):
        return f"{ast.unparse(node)} runs on a slice of rows"
    if isinstance(arg, ast.Name):
        for loop in ix.enclosing_loops(node):
            if isinstance(loop, ast.For) and arg.id in {e.id for e in ast.walk(loop.target) if isinstance(e, ast.Name)}:
                loader, _ = _loop_loader(ix, loop)
                if loader and _loader_batches(ix, loader):
                    return f"{ast.unparse(node)} runs on a batch of '{loader}'"
    return None


@rule("prediction-shape-mismatch")
def prediction_shape_mismatch(ix: FileIndex) -> Iterator[Hit]:
    """``(out.argmax() == y)`` with ``out`` a batch of outputs: the argmax of the flattened batch is one number
    compared with every label (issue 33, Zasder3/train-CLIP#6)."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            pairs = [(node.left, node.comparators[0]), (node.comparators[0], node.left)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "eq", "ne") and len(node.args) == 1:
            pairs = [(node.func.value, node.args[0]), (node.args[0], node.func.value)]
        else:
            continue
        for pred, other in pairs:
            flat = _flat_argmax(ix, _single_value(ix, _strip(pred)))
            if flat is None or isinstance(_strip(other), ast.Constant):
                continue
            why = _batched_model_output(ix, _argmax_operand(flat))
            if why is None:
                continue
            yield Hit("prediction-shape-mismatch", node,
                      f"{ast.unparse(flat)} has no dim, so it is one index into the flattened batch "
                      f"({why}), compared here with {ast.unparse(other)}: every sample is scored against the same "
                      f"number, not against its own prediction",
                      fix=f"take the argmax over the classes: {ast.unparse(_argmax_operand(flat))}.argmax(dim=1) "
                          f"(or dim=-1)")
            break


# -- predictions-not-denormalised ----------------------------------------------------------------------------

_SCALERS = frozenset({"StandardScaler", "MinMaxScaler", "RobustScaler", "MaxAbsScaler", "QuantileTransformer",
                      "PowerTransformer"})
_ERRORS = frozenset({"mean_absolute_error", "mean_squared_error", "root_mean_squared_error", "r2_score",
                     "mean_absolute_percentage_error", "median_absolute_error", "l1_loss", "mse_loss",
                     "smooth_l1_loss", "huber_loss"})


#: log transforms of a target (undone by exp / expm1)
_LOGS = frozenset({"log1p", "log", "log10", "log2"})

_SPLITS = frozenset({"train", "training", "test", "testing", "val", "valid", "validation", "eval", "dev", "tr", "te",
                     "holdout", "trn", "tst"})


def _quantity(name: str) -> str:
    """What a tensor's name says it holds, without the split: ``y_train`` and ``y_test`` -> ``y``."""
    words = [t for t in tokens(name) if t not in _SPLITS]
    return "_".join(words) if words else name


_WRAPS = frozenset({"tensor", "as_tensor", "from_numpy", "asarray", "array", "FloatTensor", "Tensor"})


def _root(node: ast.AST) -> str | None:
    """The name a value is read from: ``y`` for ``y``, ``y[350:]``, ``y.float()``."""
    node = _strip(node)
    while isinstance(node, ast.Subscript):
        node = _strip(node.value)
    return node.id if isinstance(node, ast.Name) else None


def _standardises(node: ast.AST) -> bool:
    """``(t - a) / b`` (a shift, then a scale)."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.BinOp) \
        and isinstance(node.left.op, ast.Sub)


def _normaliser_methods(ix: FileIndex) -> set[str]:
    """Functions and methods of the file that return ``(arg - a) / b`` of their argument, and nothing else."""
    key = "metrics:normalisers"
    found = ix.cache.get(key)
    if found is None:
        found = set()
        for name, funcs in ix.functions.items():
            if len(funcs) != 1:
                continue
            rets = [n for n in ix.scope_nodes(funcs[0]) if isinstance(n, ast.Return)]
            if rets and all(r.value is not None and _standardises(r.value) for r in rets):
                found.add(name)
        ix.cache[key] = found
    return found


def _normalised(ix: FileIndex, node: ast.AST, depth: int = 0) -> tuple[str, str] | None:
    """(the raw tensor's name, how it was normalised) when ``node`` is a normalised copy of a named tensor:
    ``(y - mean) / std`` (a min-max scaling too), ``normalizer.norm(y)`` (a method returning ``(t - a) / b``),
    a fitted scaler's ``transform(y)`` / ``fit_transform(y)``, a log transform (``torch.log1p(y)``,
    ``np.log(y)``, ``y.log1p()``)."""
    node = _strip(node)
    if depth > 3:
        return None
    if isinstance(node, ast.Subscript):
        return _normalised(ix, node.value, depth + 1)
    if isinstance(node, ast.Name):
        value = _single_value(ix, node)
        return _normalised(ix, value, depth + 1) if value is not node else None
    if isinstance(node, ast.Call) and node.args and (dotted(node.func) or "").rsplit(".", 1)[-1] in _WRAPS:
        return _normalised(ix, node.args[0], depth + 1)
    if _standardises(node):
        raw = _root(node.left.left)
        return (raw, ast.unparse(node)) if raw else None
    if isinstance(node, ast.Call) and not node.keywords and (dotted(node.func) or "").rsplit(".", 1)[-1] in _LOGS:
        # a log transform: torch.log1p(y), np.log(y), y.log1p()
        arg = node.args[0] if len(node.args) == 1 else node.func.value \
            if not node.args and isinstance(node.func, ast.Attribute) else None
        raw = _root(arg) if arg is not None else None
        if raw is not None and (node.args or raw not in ("torch", "np", "numpy", "math")):
            return raw, ast.unparse(node)
        return None
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        raw = _root(node.args[0])
        if raw is None or name is None:
            return None
        if name in _normaliser_methods(ix):
            return raw, ast.unparse(node)
        if name in ("transform", "fit_transform") and isinstance(f, ast.Attribute):
            made = ix.assigns.get(dotted(f.value) or "", [])
            if made and all(isinstance(m, ast.Call) and (dotted(m.func) or "").rsplit(".", 1)[-1] in _SCALERS
                            for m in made):
                return raw, ast.unparse(node)
    return None


def _scope_key(ix: FileIndex, node: ast.AST) -> int:
    scope = ix.enclosing_function(node)
    return id(scope) if scope is not None else 0


def _training_targets(ix: FileIndex) -> dict[tuple[int, str], tuple[ast.AST, str]]:
    """Raw tensor name -> (where, how) for targets the model is trained on in normalised form: the second
    tensor of a ``TensorDataset`` a training loader draws from, or the target of a loss in a training loop."""
    out: dict[tuple[int, str], tuple[ast.AST, str]] = {}
    for call in ix.calls:
        cands: list[ast.AST] = []
        if ix.call_is(call, "TensorDataset") and len(call.args) >= 2:
            cands = [call.args[-1]]
        elif ix.is_loss_fn(call) not in (None, "unknown") and len(call.args) >= 2 and ix.enclosing_loops(call):
            cands = [call.args[1]]
        for c in cands:
            found = _normalised(ix, c)
            if found is not None:
                raw, how = found
                if not any(_normalised(ix, v) for v in ix.assigns.get(raw, [])):
                    out.setdefault((_scope_key(ix, c), _quantity(raw)), (c, how))
    return out


def _raw_prediction(ix: FileIndex, node: ast.AST, depth: int = 0) -> str | None:
    """Why ``node`` is a model's output with nothing applied to it (no inverse transform), or None: a model
    call, a name assigned once from one, an in-file function every ``return`` of which is one."""
    node = _strip(node)
    if depth > 3:
        return None
    if isinstance(node, ast.Name):
        value = _single_value(ix, node)
        return _raw_prediction(ix, value, depth + 1) if value is not node else None
    if not isinstance(node, ast.Call):
        return None
    if node in model_calls(ix, ix.statement_of(node)):
        return f"{ast.unparse(node)} is the model's output"
    callee = ix.callee(node)
    if callee is not None:
        rets = [n for n in ix.scope_nodes(callee) if isinstance(n, ast.Return)]
        if rets and all(r.value is not None and _raw_prediction(ix, r.value, depth + 1) for r in rets):
            return f"{ast.unparse(node.func)}() returns the model's output as it is (line {rets[0].lineno})"
    return None


@rule("predictions-not-denormalised")
def predictions_not_denormalised(ix: FileIndex) -> Iterator[Hit]:
    """A model trained on standardised targets, whose raw outputs are scored against the raw targets:
    the predictions are in standard deviations around zero, the targets in their own units (issue 33,
    CompRhys/aviary#90)."""
    trained = _training_targets(ix)
    if not trained:
        return
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            pairs = [(node.left, node.right), (node.right, node.left)]
        elif isinstance(node, ast.Call) and (ix.qualname(node.func) or "").rsplit(".", 1)[-1] in _ERRORS \
                and len(node.args) >= 2 \
                and ix.is_loss_fn(node) in (None, "l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss"):
            pairs = [(node.args[0], node.args[1]), (node.args[1], node.args[0])]
        else:
            continue
        for pred, target in pairs:
            raw = _root(target)
            key = (_scope_key(ix, node), _quantity(raw)) if raw is not None else None
            if key is None or key not in trained or _normalised(ix, target) is not None \
                    or any(_normalised(ix, v) for v in ix.assigns.get(raw, [])):
                continue
            why = _raw_prediction(ix, pred)
            if why is None:
                continue
            where, how = trained[key]
            yield Hit("predictions-not-denormalised", node,
                      f"the model is trained on {how} (line {where.lineno}), so its outputs are in those "
                      f"normalised units, but here {why} and is scored against the raw '{raw}': the error mixes "
                      f"two units",
                      fix="undo the normalisation on the predictions before scoring them (pred * std + mean, "
                          "or the scaler's inverse_transform), or score against the normalised targets")
            break


# -- metric-not-reset ----------------------------------------------------------------------------------------

#: Lightning hooks that run once per epoch
_EPOCH_HOOKS = frozenset({"on_validation_epoch_end", "validation_epoch_end", "on_train_epoch_end",
                          "training_epoch_end", "on_test_epoch_end", "test_epoch_end"})


#: the protocol of a running metric: what a class defines to be one (torchmetrics' own, an AverageMeter's)
_METRIC_PROTOCOL = frozenset({"update", "reset"})


def _metric_classes(ix: FileIndex) -> dict[str, ast.ClassDef]:
    """Classes of the file that are running metrics by their protocol: ``update()`` adds a batch to a state that
    ``reset()`` clears (torchmetrics' protocol written by hand, ``AverageMeter``), and ``compute()`` reads it."""
    out = {}
    for name, cls in ix.classes.items():
        methods = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if _METRIC_PROTOCOL <= methods and name not in ix.module_classes and (
                "compute" in methods or _state_attrs(cls)):
            out[name] = cls
    return out


def _state_attrs(cls: ast.ClassDef) -> set[str]:
    """The attributes a metric class's ``reset()`` sets on ``self`` (an AverageMeter's ``avg``, ``sum``,
    ``count``): its state, read directly where the class has no ``compute()``."""
    out: set[str] = set()
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "reset":
            for n in ast.walk(fn):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and dotted(n.value) == "self":
                    out.add(n.attr)
    return out


def _reads_of_state(ix: FileIndex, name: str, cls: ast.ClassDef) -> list[ast.AST]:
    """Reads ``name.avg`` of the state of an instance of a metric class without ``compute()``."""
    attrs = _state_attrs(cls)
    return [a for a in ix.attributes if isinstance(a.ctx, ast.Load) and a.attr in attrs and dotted(a.value) == name
            and ix.enclosing_class(a) is not cls]


def _metric_objects(ix: FileIndex) -> dict[str, ast.AST]:
    """Names (``acc``, ``self.val_acc``) assigned a torchmetrics metric (``Accuracy(...)``, ``.to(device)``
    of one) or an instance of a class of the file with the metric protocol (``update``/``compute``/``reset``),
    in every assignment of the file -> the first assignment's value."""
    own = _metric_classes(ix)
    out: dict[str, ast.AST] = {}
    for name, values in ix.assigns.items():
        ok = bool(values)
        for v in values:
            call = v
            while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in (
                    "to", "cuda", "cpu"):
                call = call.func.value
            q = (ix.qualname(call.func) or "") if isinstance(call, ast.Call) else ""
            if not ((q.startswith("torchmetrics.") and q.rsplit(".", 1)[-1][:1].isupper())
                    or (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in own)):
                ok = False
        if ok:
            out[name] = values[0]
    return out


def _resets_elsewhere(ix: FileIndex) -> bool:
    """Is a ``reset()`` called anywhere but inside a metric class of the file on itself (``self.reset()`` in its
    ``__init__``)?  Which objects such a call reaches is not followed."""
    own = set(_metric_classes(ix).values())
    for c in ix.calls:
        if not (isinstance(c.func, ast.Attribute) and c.func.attr in ("reset", "reset_metrics")):
            continue
        if dotted(c.func.value) == "self" and ix.enclosing_class(c) in own:
            continue
        return True
    return False


def _calls_on(ix: FileIndex, name: str, methods: tuple[str, ...]) -> list[ast.Call]:
    out = []
    for call in ix.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr in methods and dotted(f.value) == name:
            out.append(call)
        elif "__call__" in methods and dotted(f) == name:
            out.append(call)
    return out


def _made_in(ix: FileIndex, name: str, region: ast.AST) -> bool:
    """Is ``name`` (re)assigned inside ``region`` (a fresh metric each time it runs)?"""
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
        dotted(t) == name for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
        for n in ast.walk(region))


def _repeated_pass(ix: FileIndex, name: str, compute: ast.Call, updates: list[ast.Call]) -> str | None:
    """Why ``compute`` runs once per pass over the data, again and again, over updates that accumulate
    across the passes, or None."""
    func = ix.enclosing_function(compute)
    if func is not None and func.name in _EPOCH_HOOKS:
        return f"in {func.name}, which Lightning calls at the end of every epoch"
    for outer in ix.enclosing_loops(compute):
        if _made_in(ix, name, outer):
            return None
        if any(any(lp is not outer and any(a is outer for a in ix.ancestors(lp)) for lp in ix.enclosing_loops(u))
               for u in updates):
            return f"in the loop at line {outer.lineno}, once per pass of the loop over batches inside it"
    if func is None or _made_in(ix, name, func) or ix.enclosing_loops(compute):
        return None
    inside = [u for u in updates if any(a is func for a in ix.ancestors(u)) and ix.enclosing_loops(u)]
    looped = [c for c in ix.call_sites(func) if ix.enclosing_loops(c)]
    if inside and looped:
        return f"in {func.name}(), called in a loop (line {looped[0].lineno})"
    return None


@rule("metric-not-reset")
def metric_not_reset(ix: FileIndex) -> Iterator[Hit]:
    """A torchmetrics metric updated batch by batch and computed once per pass, never reset: each compute()
    covers every pass so far (issue 33, JetBrains-Research/code2seq#112, MichiganCOG/ViP#34)."""
    metrics = _metric_objects(ix)
    if not metrics or _resets_elsewhere(ix):
        return  # something is reset somewhere: which objects it reaches is not followed
    logged = set()  # metric objects given to Lightning's log/log_dict themselves (not their compute())
    for c in ix.calls:
        if (dotted(c.func) or "").rsplit(".", 1)[-1] in ("log", "log_dict"):
            for a in list(c.args) + [k.value for k in c.keywords]:
                logged.update(dotted(v) for v in (a.values if isinstance(a, ast.Dict) else [a]))
    own = _metric_classes(ix)

    def kind(name: str) -> str:
        v = metrics[name]
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
            v = v.func.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in own:
            return f"an instance of {v.func.id}, whose update() accumulates until reset()"
        return "a torchmetrics metric"

    for name in metrics:
        if name in logged:
            continue  # Lightning resets a metric object it is given to log
        updates = _calls_on(ix, name, ("update", "forward", "__call__"))
        if not updates:
            continue
        made = metrics[name]
        while isinstance(made, ast.Call) and isinstance(made.func, ast.Attribute):
            made = made.func.value
        cls = own.get(made.func.id) if isinstance(made, ast.Call) and isinstance(made.func, ast.Name) else None
        computes: list[ast.AST] = list(_calls_on(ix, name, ("compute",)))
        if cls is not None and not any(isinstance(f, ast.FunctionDef) and f.name == "compute" for f in cls.body):
            computes = _reads_of_state(ix, name, cls)
        for compute in computes:
            why = _repeated_pass(ix, name, compute, updates)
            if why is None:
                continue
            yield Hit("metric-not-reset", compute,
                      f"'{name}' ({kind(name)}, line {metrics[name].lineno}) is updated batch by batch "
                      f"(line {updates[0].lineno}) and computed {why}, but never reset: its state keeps every "
                      f"batch since the first pass, so each compute() reports the metric over all passes so far, "
                      f"not this one's (a curve that lags, early stopping and model selection on stale numbers)",
                      fix=f"call {name}.reset() after each compute() (or before each pass)")
            break


# -- metric-shared-across-stages -----------------------------------------------------------------------------

_TRAIN_WORDS = frozenset({"train", "training"})
_EVAL_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluate", "evaluation", "test", "predict"})


def _stage(func: ast.AST | None) -> str | None:
    """'train' / 'eval' from the name of the method a metric is updated in (``training_step``,
    ``validation_step``, ``test_step``, ``train_one_epoch``, ``evaluate``), else None."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    words = set(tokens(func.name))
    if words & _TRAIN_WORDS and not words & _EVAL_WORDS:
        return "train"
    if words & _EVAL_WORDS and not words & _TRAIN_WORDS:
        return "eval"
    return None


@rule("metric-shared-across-stages")
def metric_shared_across_stages(ix: FileIndex) -> Iterator[Hit]:
    """One metric object (``self.accuracy``) updated by the training step and by the validation or test step:
    its state mixes both (Lightning-AI/torchmetrics#1450, Lightning-AI/pytorch-lightning#11601,
    graviraja/MLOps-Basics#16)."""
    metrics = _metric_objects(ix)
    for name in metrics:
        if not name.startswith("self."):
            continue
        updates = _calls_on(ix, name, ("update", "forward", "__call__"))
        by_stage: dict[str, ast.Call] = {}
        for u in updates:
            stage = _stage(ix.enclosing_function(u))
            if stage is not None:
                by_stage.setdefault(stage, u)
        if len(by_stage) < 2:
            continue
        resets = _calls_on(ix, name, ("reset",))
        if any("start" in tokens(getattr(ix.enclosing_function(c), "name", "")) for c in resets):
            continue  # reset when a stage starts: the author keeps the stages apart by hand
        if {_stage(ix.enclosing_function(c)) for c in resets} >= {"train", "eval"}:
            continue  # each stage resets what it accumulated
        train, ev = by_stage["train"], by_stage["eval"]
        tf, ef = ix.enclosing_function(train), ix.enclosing_function(ev)
        yield Hit("metric-shared-across-stages", ev,
                  f"'{name}' (line {metrics[name].lineno}) is updated by {getattr(tf, 'name', '?')}() (line "
                  f"{train.lineno}) and by {getattr(ef, 'name', '?')}() here: one metric object holds one running "
                  f"state, so the evaluation value also counts the training batches accumulated since the last reset "
                  f"(Lightning validates before the training epoch's metrics are reset), and the training value the "
                  f"evaluation ones",
                  fix=f"give each stage its own metric object ({name.split('.', 1)[1]} for training, a clone such as "
                      f"self.val_{name.split('.', 1)[1]} = {name}.clone() for evaluation)")
