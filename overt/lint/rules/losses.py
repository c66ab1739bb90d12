"""Rules about losses and what is fed to them (OVT3xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.units import label_names
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

LOGIT_LOSSES = {"CrossEntropyLoss", "cross_entropy"}
LOGPROB_LOSSES = {"NLLLoss", "nll_loss"}
SIGMOID_LOSSES = {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits"}
REGRESSION_LOSSES = {"MSELoss", "mse_loss", "L1Loss", "l1_loss", "SmoothL1Loss", "smooth_l1_loss", "HuberLoss"}


def _op(ix: FileIndex, expr: ast.AST | None, self_attrs: dict[str, str] | None = None) -> str | None:
    """'softmax' / 'sigmoid' when ``expr`` is that op (function, method or nn module call)."""
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    if isinstance(func, ast.Call):  # nn.Softmax(dim=1)(x)
        last = (ix.qualname(func.func) or "").rsplit(".", 1)[-1]
        return {"Softmax": "softmax", "Sigmoid": "sigmoid"}.get(last)
    text = dotted(func) or ""
    if self_attrs and text in self_attrs:
        return self_attrs[text]
    last = text.rsplit(".", 1)[-1]
    if last in ("softmax", "sigmoid"):
        return last
    return None


def _fed(ix: FileIndex, arg: ast.AST | None) -> str | None:
    op = _op(ix, arg)
    if op is None and isinstance(arg, ast.Name):
        values = ix.assigns.get(arg.id, [])
        ops = {_op(ix, v) for v in values}
        if len(ops) == 1:
            op = ops.pop()
    return op


def _class_softmax_attrs(ix: FileIndex, cls: ast.ClassDef) -> dict[str, str]:
    out = {}
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            last = (ix.qualname(n.value.func) or "").rsplit(".", 1)[-1]
            if last in ("Softmax", "Sigmoid") or (last == "Sequential" and _ends_in_softmax(ix, n.value)):
                for t in n.targets:
                    if dotted(t):
                        out[dotted(t)] = "softmax" if last == "Sequential" else last.lower()
    return out


@rule("softmax-before-cross-entropy")
def softmax_before_cross_entropy(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        kind = ix.is_loss_fn(call)
        if kind is None or kind == "unknown":
            continue
        arg = call.args[0] if call.args else kwarg(call, "input")
        op = _fed(ix, arg)
        if op == "softmax" and kind in LOGIT_LOSSES:
            yield Hit("softmax-before-cross-entropy", call,
                      f"{kind} applies log-softmax itself, so feeding it softmax probabilities applies softmax "
                      f"twice and shrinks the gradients; pass the raw logits")
        elif op == "softmax" and kind in LOGPROB_LOSSES:
            yield Hit("softmax-before-cross-entropy", call,
                      f"{kind} expects log-probabilities but gets softmax probabilities; use log_softmax (or "
                      f"CrossEntropyLoss on the raw logits)")
        elif op == "sigmoid" and kind in SIGMOID_LOSSES:
            yield Hit("softmax-before-cross-entropy", call,
                      f"{kind} applies the sigmoid itself, so feeding it sigmoid outputs applies it twice; pass "
                      f"the raw logits")
    nll_fed = _ce_inputs(ix, LOGPROB_LOSSES)
    for name in ix.module_classes:
        if nll_fed and _instances(ix, name) & nll_fed:
            ret = _logit_return(ix, ix.classes[name])
            if ret is not None:
                yield Hit("softmax-before-cross-entropy", ret,
                          f"{name}.forward returns raw logits (its last op is a linear layer) and its output is fed "
                          f"to NLLLoss, which expects log-probabilities; return log_softmax(...) or train with "
                          f"CrossEntropyLoss on the logits")
    fed = _ce_inputs(ix)
    if not fed:
        return
    for name in ix.module_classes:
        cls = ix.classes[name]
        if not _instances(ix, name) & fed:
            continue
        attrs = _class_softmax_attrs(ix, cls)
        for item in cls.body:
            if isinstance(item, ast.FunctionDef) and item.name == "forward":
                for n in ix.scope_nodes(item):
                    if isinstance(n, ast.Return) and _op(ix, n.value, attrs) == "softmax":
                        yield Hit("softmax-before-cross-entropy", n,
                                  f"{name}.forward returns softmax probabilities and its output is fed to "
                                  f"cross-entropy, which applies log-softmax itself: softmax runs twice and the "
                                  f"gradients shrink; return the raw logits and apply softmax only for "
                                  f"predictions")
    for call in ix.calls:
        if ix.call_is(call, "Sequential") and _ends_in_softmax(ix, call):
            parent = ix.parents.get(call)
            names = {dotted(t) for t in parent.targets} if isinstance(parent, ast.Assign) else set()
            if names & fed:
                yield Hit("softmax-before-cross-entropy", call.args[-1],
                          "this Sequential ends in Softmax and its output is fed to cross-entropy, which applies "
                          "log-softmax itself: softmax runs twice; drop the final Softmax layer")


def _ends_in_softmax(ix: FileIndex, call: ast.Call) -> bool:
    last = call.args[-1] if call.args else None
    return isinstance(last, ast.Call) and ix.call_is(last, "Softmax")


def _instances(ix: FileIndex, cls_name: str) -> set[str]:
    """Names assigned an instance of ``cls_name`` (``model = Net().to(device)``)."""
    out = set()
    for name, values in ix.assigns.items():
        for v in values:
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("to", "cuda"):
                v = v.func.value
            if isinstance(v, ast.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] == cls_name:
                out.add(name)
    return out


_LINEAR = ("Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d")


def _logit_return(ix: FileIndex, cls: ast.ClassDef) -> ast.Return | None:
    """The return of ``cls.forward`` when every return hands back a linear layer's raw output."""
    layers = set()
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            last = (ix.qualname(n.value.func) or "").rsplit(".", 1)[-1]
            if last in _LINEAR:
                layers.update(dotted(t) for t in n.targets if dotted(t))
    forward = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
    if forward is None or not layers:
        return None
    nodes = ix.scope_nodes(forward)
    returns = [n for n in nodes if isinstance(n, ast.Return) and n.value is not None]
    if not returns:
        return None
    for ret in returns:
        value = ret.value
        if isinstance(value, ast.Name):
            assigns = [n for n in nodes if isinstance(n, ast.Assign) and n.lineno < ret.lineno
                       and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
            value = assigns[-1].value if assigns else None
        if not (isinstance(value, ast.Call) and dotted(value.func) in layers):
            return None
    return returns[-1]


def _ce_inputs(ix: FileIndex, kinds: set[str] = LOGIT_LOSSES) -> set[str]:
    """Names of the models whose output reaches a loss of ``kinds`` (``criterion(model(x), y)``,
    or ``out = model(x); criterion(out, y)``)."""
    out = set()
    for call in ix.calls:
        if ix.is_loss_fn(call) not in kinds:
            continue
        arg = call.args[0] if call.args else kwarg(call, "input")
        cands = [arg] + (ix.assigns.get(arg.id, []) if isinstance(arg, ast.Name) else [])
        for c in cands:
            if isinstance(c, ast.Call) and dotted(c.func):
                out.add(dotted(c.func))
    return out


def _base_name(expr: ast.AST | None) -> str | None:
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in (
            "float", "to", "view", "unsqueeze", "squeeze", "type", "double", "reshape", "cuda", "half"):
        expr = expr.func.value
    return dotted(expr)


@rule("wrong-loss-for-task")
def wrong_loss_for_task(ix: FileIndex) -> Iterator[Hit]:
    labels = label_names(ix)
    for call in ix.calls:
        kind = ix.is_loss_fn(call)
        if kind not in REGRESSION_LOSSES:
            continue
        target = call.args[1] if len(call.args) > 1 else kwarg(call, "target")
        name = _base_name(target)
        if name and name in labels:
            yield Hit("wrong-loss-for-task", call,
                      f"{kind} is a regression loss but `{name}` holds integer class indices, so the model is "
                      f"trained to output the class number as a value; use CrossEntropyLoss on logits with "
                      f"the class indices as targets")
