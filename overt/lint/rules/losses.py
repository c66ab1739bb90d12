"""Rules about losses and what is fed to them (OVT3xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.units import label_names
from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

LOGIT_LOSSES = {"CrossEntropyLoss", "cross_entropy"}
LOGPROB_LOSSES = {"NLLLoss", "nll_loss"}
SIGMOID_LOSSES = {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits"}
REGRESSION_LOSSES = {"MSELoss", "mse_loss", "L1Loss", "l1_loss", "SmoothL1Loss", "smooth_l1_loss", "HuberLoss"}


def loss_kind(ix: FileIndex, call: ast.Call) -> str | None:
    """The loss a call computes: by name (``nn.CrossEntropyLoss()(...)``, ``F.nll_loss``,
    ``criterion`` assigned a loss module), or, for a criterion-like name, by following it
    to a loss module (a parameter bound to one at every call site, a ``self.X`` attribute)."""
    kind = ix.is_loss_fn(call)
    if kind == "unknown":  # named like a criterion: follow it (a parameter, an attribute) to its loss module
        key = ("loss_kind", id(call))
        if key not in ix.cache:
            ix.cache[key] = values_for(ix).of(call.func).loss_module or kind
        return ix.cache[key]
    return kind


_CHECKED = LOGIT_LOSSES | LOGPROB_LOSSES | SIGMOID_LOSSES
_WHAT = {"probs": "softmax probabilities", "sigmoid": "sigmoid outputs", "logits": "raw logits"}


def _mismatch(kind: str, head: str | None) -> str | None:
    """Why feeding ``head`` to a loss of ``kind`` is wrong, or None when it is fine (or unknown)."""
    if head == "probs" and kind in LOGIT_LOSSES:
        return (f"{kind} applies log-softmax itself, so feeding it softmax probabilities applies softmax twice "
                f"and shrinks the gradients; pass the raw logits (apply softmax only for predictions)")
    if head == "probs" and kind in LOGPROB_LOSSES:
        return (f"{kind} expects log-probabilities but gets softmax probabilities; use log_softmax (or "
                f"CrossEntropyLoss on the raw logits)")
    if head == "sigmoid" and kind in SIGMOID_LOSSES:
        return (f"{kind} applies the sigmoid itself, so feeding it sigmoid outputs applies it twice; pass the "
                f"raw logits (or use BCELoss on the probabilities)")
    if head == "logits" and kind in LOGPROB_LOSSES:
        return (f"{kind} expects log-probabilities but gets raw logits (the output of a linear layer); apply "
                f"log_softmax first, or train with CrossEntropyLoss on the logits")
    return None


@rule("softmax-before-cross-entropy")
def softmax_before_cross_entropy(ix: FileIndex) -> Iterator[Hit]:
    vals = values_for(ix)
    for call in ix.calls:
        kind = loss_kind(ix, call)
        if kind not in _CHECKED:
            continue
        arg = call.args[0] if call.args else kwarg(call, "input")
        if arg is None:
            continue
        v = vals.of(arg)
        why = _mismatch(kind, v.head)
        if why is None:
            continue
        direct = isinstance(arg, ast.Call) and v.origin == f"line {arg.lineno}"
        src = "" if direct else f"its input holds {_WHAT[v.head]} (made at {v.origin}): "
        yield Hit("softmax-before-cross-entropy", call, f"{src}{why}")


def _base_name(expr: ast.AST | None) -> str | None:
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in (
            "float", "to", "view", "unsqueeze", "squeeze", "type", "double", "reshape", "cuda", "half"):
        expr = expr.func.value
    return dotted(expr)


@rule("wrong-loss-for-task")
def wrong_loss_for_task(ix: FileIndex) -> Iterator[Hit]:
    labels = label_names(ix)
    vals = values_for(ix)
    for call in ix.calls:
        kind = loss_kind(ix, call)
        if kind not in REGRESSION_LOSSES:
            continue
        target = call.args[1] if len(call.args) > 1 else kwarg(call, "target")
        if target is None:
            continue
        name = _base_name(target)
        if (name and name in labels) or vals.of(target).labels:
            shown = name or ix.segment(target)
            yield Hit("wrong-loss-for-task", call,
                      f"{kind} is a regression loss but `{shown}` holds integer class indices, so the model is "
                      f"trained to output the class number as a value; use CrossEntropyLoss on logits with "
                      f"the class indices as targets")
