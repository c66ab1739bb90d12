"""Raw logits handed to a loss written for probabilities (OVT329 ``probability-loss-on-logits``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, FuncNode, dotted
from overt.lint.rules.base import Hit, rule

#: losses that take logits: their input is proven logits
_LOGIT_LOSSES = frozenset({"binary_cross_entropy_with_logits", "BCEWithLogitsLoss", "cross_entropy",
                           "CrossEntropyLoss"})
#: overlap losses, computed from probabilities (products and sums of the scores and the mask)
_OVERLAP_WORDS = ("dice", "iou", "jaccard", "tversky")
#: what turns logits into probabilities (or a flag that may)
_SQUASHERS = frozenset({"sigmoid", "softmax", "log_softmax", "logsigmoid", "exp", "tanh", "clamp", "clip",
                        "clamp_", "sigmoid_", "softmax2d", "normalize", "expit"})


def _squashes(func: FuncNode, param: str) -> bool:
    """Does ``func`` turn ``param`` into probabilities itself, or may it (a flag parameter, a
    non-linearity handed in)?"""
    names = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    if any(w in n.lower() for n in names for w in ("logit", "nonlin", "sigmoid", "softmax", "activation")):
        return True
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            last = (dotted(node.func) or "").rsplit(".", 1)[-1].lower()
            if last in _SQUASHERS or "sigmoid" in last or "softmax" in last:
                return True
    return False


@rule("probability-loss-on-logits")
def probability_loss_on_logits(ix: FileIndex) -> Iterator[Hit]:
    overlap = {name: funcs[0] for name, funcs in ix.functions.items()
               if len(funcs) == 1 and any(w in name.lower() for w in _OVERLAP_WORDS)}
    if not overlap:
        return
    for call in ix.calls:
        kind = ix.is_loss_fn(call)
        if kind not in _LOGIT_LOSSES or not call.args or not isinstance(call.args[0], ast.Name):
            continue
        logits = call.args[0].id
        scope = ix.enclosing_function(call) or ix.tree
        if len([v for v in ix.assigns.get(logits, [])]) != 1:
            continue  # bound more than once: which value reaches which call is not known here
        for other in ix.scope_nodes(scope):
            if not (isinstance(other, ast.Call) and isinstance(other.func, ast.Name) and other.func.id in overlap):
                continue
            func = overlap[other.func.id]
            params = [a.arg for a in func.args.posonlyargs + func.args.args]
            for k, arg in enumerate(other.args[:len(params)]):
                if isinstance(arg, ast.Name) and arg.id == logits and not _squashes(func, params[k]):
                    yield Hit("probability-loss-on-logits", other,
                              f"`{ix.segment(other)}` gives `{func.name}` the raw logits `{logits}` (the input of "
                              f"{kind} at line {call.lineno}, which applies its own sigmoid/softmax), and "
                              f"`{func.name}` (line {func.lineno}) computes its overlap from `{params[k]}` as "
                              "probabilities, with no sigmoid or softmax: on logits of either sign its sums can "
                              "cancel or change sign, the term explodes and its gradient swamps the rest of the loss",
                              fix=f"give it probabilities: {func.name}(torch.sigmoid({logits}), ...) (softmax over "
                                  "the classes for a multi-class mask)")
