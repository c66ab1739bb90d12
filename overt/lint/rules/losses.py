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
KL_LOSSES = {"KLDivLoss", "kl_div"}  # input: log-probabilities; target: probabilities (log-probs with log_target)
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


_CHECKED = LOGIT_LOSSES | LOGPROB_LOSSES | SIGMOID_LOSSES | KL_LOSSES
_WHAT = {"probs": "softmax probabilities", "sigmoid": "sigmoid outputs", "logits": "raw logits"}


# (what the input holds, the losses that must not get it, why, the fix)
_MISMATCHES = [
    ("probs", LOGIT_LOSSES, "{kind} applies log-softmax itself, so feeding it softmax probabilities applies softmax "
     "twice and shrinks the gradients", "pass the raw logits (apply softmax only for predictions)"),
    ("sigmoid", LOGIT_LOSSES, "{kind} applies log-softmax itself, so feeding it sigmoid outputs squashes every logit "
     "into [0, 1]: the softmax over them is nearly uniform and the gradients shrink", "pass the raw logits"),
    ("probs", LOGPROB_LOSSES, "{kind} expects log-probabilities but gets softmax probabilities",
     "use log_softmax (or CrossEntropyLoss on the raw logits)"),
    ("probs", KL_LOSSES, "{kind} expects log-probabilities as its input but gets softmax probabilities (it computes "
     "target * (log(target) - input)), so the loss is no longer a divergence and its minimum is not the target",
     "pass log_softmax of the logits as the input (the target stays probabilities)"),
    ("logits", KL_LOSSES, "{kind} expects log-probabilities as its input but gets raw logits (the output of a "
     "linear layer)", "apply log_softmax to the input first"),
    ("sigmoid", SIGMOID_LOSSES, "{kind} applies the sigmoid itself, so feeding it sigmoid outputs applies it twice",
     "pass the raw logits (or use BCELoss on the probabilities)"),
    ("logits", LOGPROB_LOSSES, "{kind} expects log-probabilities but gets raw logits (the output of a linear layer)",
     "apply log_softmax first, or train with CrossEntropyLoss on the logits"),
]


def _mismatch(kind: str, head: str | None) -> tuple[str, str] | None:
    """(why, fix) when feeding ``head`` to a loss of ``kind`` is wrong; None when it is fine (or unknown)."""
    for held, losses, why, fix in _MISMATCHES:
        if head == held and kind in losses:
            return why.format(kind=kind), fix
    return None


def _may_make_probabilities(ix: FileIndex) -> bool:
    """Can a softmax or sigmoid output reach this file's losses? (The file names one, or it
    imports from another module of the project, which might.)"""
    text = "\n".join(ix.source_lines)
    return "oftmax" in text or "igmoid" in text or (ix.project is not None and ix.project.imports_project(ix))


@rule("softmax-before-cross-entropy")
def softmax_before_cross_entropy(ix: FileIndex) -> Iterator[Hit]:
    vals = values_for(ix)
    # raw logits fed to NLL or KL: always
    checked = _CHECKED if _may_make_probabilities(ix) else LOGPROB_LOSSES | KL_LOSSES
    for call in ix.calls:
        kind = loss_kind(ix, call)
        if kind not in checked:
            continue
        if kind == "kl_div":
            yield from _kl_target(ix, call)
        arg = call.args[0] if call.args else kwarg(call, "input")
        if arg is None:
            continue
        v = vals.of(arg)
        found = _mismatch(kind, v.head)
        if found is None:
            continue
        why, fix = found
        direct = isinstance(arg, ast.Call) and v.origin == f"line {arg.lineno}"
        src = "" if direct else f"its input holds {_WHAT[v.head]} (made at {v.origin}): "
        yield Hit("softmax-before-cross-entropy", call, f"{src}{why}", fix=fix)


def _kl_target(ix: FileIndex, call: ast.Call) -> Iterator[Hit]:
    """``F.kl_div``'s target in the other domain than ``log_target`` says: softmax probabilities under
    ``log_target=True`` (read as log-probabilities: silent), log-probabilities without it."""
    target = call.args[1] if len(call.args) > 1 else kwarg(call, "target")
    flag = call.args[5] if len(call.args) > 5 else kwarg(call, "log_target")
    if target is None or (flag is not None and not isinstance(flag, ast.Constant)):
        return
    log_target = bool(flag.value) if isinstance(flag, ast.Constant) else False
    v = values_for(ix).of(target)
    if log_target and v.head == "probs":
        yield Hit("softmax-before-cross-entropy", call,
                  f"kl_div has log_target=True but its target holds softmax probabilities (made at {v.origin}): they "
                  "are read as log-probabilities, so the model is fitted to exp(p), not to p",
                  fix="pass log_softmax of the target's logits, or drop log_target=True")
    elif not log_target and v.head == "logprobs":
        yield Hit("softmax-before-cross-entropy", call,
                  f"kl_div's target holds log-probabilities (made at {v.origin}) but log_target is False: they are "
                  "read as (negative) probabilities",
                  fix="pass log_target=True, or give the target as softmax probabilities")


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
                      f"trained to output the class number as a value", fix="use CrossEntropyLoss on logits with "
                      "the class indices as targets")
