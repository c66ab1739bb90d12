"""Evaluation that reads a model's outputs in another sense than the training loss gave them (issue 33,
branch scores; the runtime side is :mod:`overt.guards.outputlink`).

``logits-thresholded-as-probabilities`` (OVT819): a model whose outputs are trained by
``BCEWithLogitsLoss``/``F.binary_cross_entropy_with_logits`` (the loss's first argument is the model's
call, or a name assigned from it, in the same function) and whose outputs are compared with 0.5 (``out >
0.5``, ``model(x) >= 0.5``) with nothing in between: a logit of 0.5 is a probability of 0.62.  Only the
model's name links the two places: the rule is silent when the same model's outputs also feed another
kind of loss, when the model's class (defined in the file) calls a sigmoid in its ``forward`` (it may
return probabilities in eval mode), and on anything computed from the output (``torch.sigmoid(out) >
0.5``).

``metric-summed-in-low-precision`` (OVT822): a scalar tensor created in bfloat16/float16
(``torch.zeros((), dtype=torch.bfloat16)``, ``torch.tensor(0.0, dtype=torch.half)``) and added to
(``+=``, ``.add_``) inside a loop of the same function: past 256 (bfloat16) or 2048 (float16) such a
sum can no longer grow by 1.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_LOGIT_LOSSES = {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits", "CrossEntropyLoss", "cross_entropy"}
_VIEWS = {"squeeze", "view", "reshape", "flatten", "view_as", "contiguous", "detach", "cpu"}
_LOW = {"bfloat16", "float16", "half"}


def _model_of(ix: FileIndex, node: ast.AST | None, scope: ast.AST | None) -> str | None:
    """The model whose call ``node`` is (``model(x)``, ``model(x).squeeze(1)``), or whose call the name
    ``node`` is assigned from (every assignment of it in ``scope``)."""
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS) \
            or isinstance(node, ast.Subscript):  # out[:, 1]: one class's logit
        node = node.value if isinstance(node, ast.Subscript) else node.func.value
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        return name if name and ix.is_model(name) else None
    if isinstance(node, ast.Name) and scope is not None:
        values = [n.value for n in ix.scope_nodes(scope)
                  if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                  and n.targets[0].id == node.id]
        models = {_model_of(ix, v, None) for v in values}
        if len(models) == 1 and values:
            return models.pop()
    return None


def _scope(ix: FileIndex, node: ast.AST) -> ast.AST:
    return ix.enclosing_function(node) or ix.tree


def _applies_sigmoid(ix: FileIndex, model: str) -> bool:
    """The in-file class the model is built from calls a sigmoid in its forward (or nothing is known
    of it: a class from elsewhere is assumed not to)."""
    for value in ix.assigns.get(model, []):
        call = value
        while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "cuda"):
            call = call.func.value
        cls = ix.classes.get(dotted(call.func) or "") if isinstance(call, ast.Call) else None
        if cls is not None and any(isinstance(n, (ast.Attribute, ast.Name)) and (
                getattr(n, "attr", None) or getattr(n, "id", None)) in ("sigmoid", "Sigmoid") for n in ast.walk(cls)):
            return True
        if isinstance(call, ast.Call) and any("Sigmoid" in (dotted(a.func) or "") for a in call.args
                                              if isinstance(a, ast.Call)):
            return True
    return False


@rule("logits-thresholded-as-probabilities")
def logits_thresholded_as_probabilities(ix: FileIndex) -> Iterator[Hit]:
    trained: dict[str, set[str]] = {}  # model -> the loss kinds its outputs feed
    for call in ix.calls:
        kind = ix.is_loss_fn(call)
        if kind is None or not call.args:
            continue
        model = _model_of(ix, call.args[0], _scope(ix, call))
        if model:
            trained.setdefault(model, set()).add(kind)
    logits = {m for m, kinds in trained.items() if kinds <= _LOGIT_LOSSES}
    if not logits:
        return
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE))):
            continue
        left, right = node.left, node.comparators[0]
        side = left if isinstance(right, ast.Constant) and right.value == 0.5 else \
            right if isinstance(left, ast.Constant) and left.value == 0.5 else None
        if side is None:
            continue
        model = _model_of(ix, side, _scope(ix, node))
        if model not in logits or _applies_sigmoid(ix, model):
            continue
        kinds = ", ".join(sorted(trained[model]))
        if trained[model] & {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits"}:
            why = ("a logit of 0.5 is a probability of 0.62, so every prediction between 0.5 and 0.62 is counted as "
                   "negative")
            fix = "apply the sigmoid first (torch.sigmoid(logits) > 0.5), or threshold the logits at 0"
        else:
            why = ("one class's logit means nothing without the other classes' (only their differences do), so the "
                   "decisions depend on the logits' offset, not on how likely the class is")
            fix = "compare probabilities (torch.softmax(logits, dim=-1)[:, k] > 0.5) or take argmax(dim=-1)"
        yield Hit("logits-thresholded-as-probabilities", node,
                  f"`{ix.segment(node)}` compares the outputs of `{model}` with 0.5, but they are trained as logits "
                  f"({kinds} takes `{model}`'s outputs): 0.5 is a probability's threshold, and {why}, so recall, "
                  "F1 and accuracy are wrong", fix=fix)


def _low_scalar(ix: FileIndex, value: ast.AST) -> str | None:
    """The half dtype of a scalar tensor made by ``value`` (``torch.zeros((), dtype=torch.bfloat16)``,
    ``torch.tensor(0.0, dtype=torch.half)``, ``torch.zeros(1).bfloat16()``), else None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in ("half", "bfloat16") and not value.args:
        inner = value.func.value
        return ("float16" if value.func.attr == "half" else "bfloat16") if _scalar_maker(ix, inner) else None
    if not (isinstance(value, ast.Call) and _scalar_maker(ix, value)):
        return None
    dtype = (dotted(kwarg(value, "dtype")) or "").rsplit(".", 1)[-1]
    return ("float16" if dtype == "half" else dtype) if dtype in _LOW else None


def _scalar_maker(ix: FileIndex, call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    q = ix.qualname(call.func) or ""
    last = q.rsplit(".", 1)[-1]
    if not ix.is_torchish(q) or last not in ("zeros", "tensor", "ones", "full"):
        return False
    if last == "tensor":
        first = call.args[0] if call.args else None
        return isinstance(first, ast.Constant) and isinstance(first.value, (int, float))
    shape = call.args[0] if call.args else None
    if last != "full" and shape is None:
        return True  # torch.zeros(dtype=...) is 0-dimensional
    return (isinstance(shape, ast.Tuple) and len(shape.elts) <= 1
            and all(isinstance(e, ast.Constant) and e.value == 1 for e in shape.elts)) \
        or (isinstance(shape, ast.Constant) and shape.value == 1)


@rule("metric-summed-in-low-precision")
def metric_summed_in_low_precision(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        dtype = _low_scalar(ix, node.value)
        if dtype is None:
            continue
        name = node.targets[0].id
        for sub in ix.scope_nodes(_scope(ix, node)):
            added = isinstance(sub, ast.AugAssign) and isinstance(sub.op, ast.Add) \
                and isinstance(sub.target, ast.Name) and sub.target.id == name
            added = added or (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                              and sub.func.attr == "add_" and isinstance(sub.func.value, ast.Name)
                              and sub.func.value.id == name)
            if not added or getattr(sub, "lineno", 0) <= node.lineno or not ix.enclosing_loops(sub):
                continue
            limit = 256 if dtype == "bfloat16" else 2048
            yield Hit("metric-summed-in-low-precision", sub,
                      f"`{name}` is a {dtype} tensor (line {node.lineno}) summed in a loop here: {dtype} keeps "
                      f"{8 if dtype == 'bfloat16' else 11} significant bits, so past {limit} the sum can no longer "
                      "grow by 1 and smaller terms round away: a count stops counting while its denominator grows, "
                      "and the accuracy or mean it feeds is wrong",
                      fix=f"create `{name}` in float32 (or sum Python numbers: .item()), whatever the model's dtype",
                      severity="warning")
            break
