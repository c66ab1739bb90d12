"""Probe 2, initial loss: the untrained model's loss against what the loss should start at
(ln C for C-class cross-entropy), and whether the loss fits the targets at all."""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from overt.doctor.common import Forward, default_forward, device_of, to
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict

TESTS = "the untrained model's loss vs ln(C) for C-class cross-entropy; that the loss fits the targets"

_REGRESSION = (nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss)
_REGRESSION_FN = (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss)
#: measured / ln(C) outside [LOW, HIGH] warns; above FAIL_HIGH fails
LOW, HIGH, FAIL_HIGH = 0.7, 1.5, 3.0


def loss_kind(loss_fn: Any) -> str:
    """``cross_entropy``, ``nll``, ``regression`` or ``other``."""
    hint = getattr(loss_fn, "loss_kind", None)  # a framework's own loss says what it is (doctor/frameworks.py)
    if hint in ("cross_entropy", "nll", "regression"):
        return hint
    if isinstance(loss_fn, nn.CrossEntropyLoss) or loss_fn is F.cross_entropy:
        return "cross_entropy"
    if isinstance(loss_fn, nn.NLLLoss) or loss_fn is F.nll_loss:
        return "nll"
    if isinstance(loss_fn, _REGRESSION) or loss_fn in _REGRESSION_FN:
        return "regression"
    return "other"


def initial_loss(model: nn.Module, loss_fn: Any, batches: list[Any], *, forward: Forward | None = None,
                 device: Any = None) -> ProbeResult:
    """Probe 2 on its own: the mean loss of ``batches`` through an untrained copy of ``model`` (eval mode)."""
    r = ProbeResult("initial-loss", "Initial loss", TESTS)
    forward = forward or default_forward
    probe = copy.deepcopy(model).eval()
    device = device_of(probe, device)
    probe.to(device)
    kind = loss_kind(loss_fn)
    total, n, outputs, targets = 0.0, 0, [], []
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch's broadcast warning: judged and reported below
            for batch in batches:
                output, target = forward(probe, to(batch, device))
                outputs.append(output)
                targets.append(target)
                if kind == "regression" and isinstance(target, torch.Tensor) and not target.is_floating_point():
                    continue  # judged below, before the loss would broadcast or fail
                loss = loss_fn(output, target)
                k = len(target) if isinstance(target, torch.Tensor) and target.dim() else 1
                total, n = total + float(loss.float()) * k, n + k
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        r.verdict, r.summary = Verdict.FAIL, f"the loss fails on a training batch: {type(exc).__name__}: {text}"
        _explain_error(r, kind, outputs, targets, exc)
        return r
    out, tgt = outputs[0], targets[0]
    if kind == "regression" and isinstance(tgt, torch.Tensor) and not tgt.is_floating_point():
        msg = (f"{type(loss_fn).__name__ if isinstance(loss_fn, nn.Module) else loss_fn.__name__} gets "
               f"{str(tgt.dtype).replace('torch.', '')} targets of shape {tuple(tgt.shape)} for outputs of shape "
               f"{tuple(out.shape)}: a regression loss on class indices treats classes as ordered numbers"
               + (" and broadcasts every output against every label" if out.shape != tgt.shape else "")
               + ".")
        fix = ("nn.CrossEntropyLoss() on raw logits with integer labels.")
        r.find("wrong-loss-for-task", msg, fix=fix, where="loss function vs targets")
        r.verdict = Verdict.FAIL
        r.summary = f"a regression loss on integer class labels ({tuple(tgt.shape)} labels, {tuple(out.shape)} outputs)"
        r.causes.append("MSELoss/L1Loss used for classification")
        r.fix = "use nn.CrossEntropyLoss() on the model's raw logits with integer class labels"
        return r
    if (kind == "regression" and isinstance(tgt, torch.Tensor) and isinstance(out, torch.Tensor)
            and out.shape != tgt.shape):
        r.find("wrong-loss-for-task",
               f"the regression loss gets outputs {tuple(out.shape)} and targets {tuple(tgt.shape)}: they broadcast, "
               "so every output is compared with every target.", fix="make the shapes equal (output.squeeze(-1) or "
               "target.unsqueeze(-1)).", where="loss function vs targets")
        r.verdict = Verdict.FAIL
        r.summary = f"outputs {tuple(out.shape)} and targets {tuple(tgt.shape)} broadcast in the loss"
        r.fix = "make the model's output and the target the same shape"
        return r
    value = total / max(n, 1)
    r.evidence.update(loss=value, loss_fn=kind, samples=n)
    r.lines.append(f"initial loss of the untrained model (eval mode, {n} samples): {value:.4f}")
    if not math.isfinite(value):
        r.find("non-finite", f"the untrained model's loss is {value}: check the inputs and the initialisation",
               where="initial loss")
        r.verdict, r.summary = Verdict.FAIL, f"initial loss is {value}"
        return r
    if kind not in ("cross_entropy", "nll") or out.dim() < 2 or not isinstance(tgt, torch.Tensor):
        r.verdict = Verdict.PASS
        r.summary = f"initial loss {value:.4g} (no ln(C) reference for {kind} losses)"
        return r
    classes = int(out.shape[1])
    if _are_probabilities(out):
        effect = ("CrossEntropyLoss applies softmax a second time" if kind == "cross_entropy" else
                  "NLLLoss gets probabilities instead of log-probabilities")
        msg = (f"every output row is in [0, 1] and sums to 1: the model returns probabilities, so {effect}"
               f" and gradients shrink.")
        fix = (f"return raw logits (drop the final softmax)"
               f"{'' if kind == 'cross_entropy' else ', or apply log_softmax'}.")
        r.find("softmax-before-cross-entropy", msg, fix=fix, where="model output")
        r.verdict = Verdict.FAIL
        r.summary = f"the model outputs probabilities (rows sum to 1) into {kind.replace('_', '-')}"
        r.causes.append("a softmax at the end of forward()")
        r.fix = "return raw logits from forward(); apply softmax only to make predictions"
        return r
    if kind == "nll" and float(out.max()) > 1e-6:
        msg = ("NLLLoss receives positive values: it expects log-probabilities (<= 0), so these are raw logits "
               "and the loss is meaningless.")
        fix = ("apply log_softmax before NLLLoss, or use CrossEntropyLoss.")
        r.find("softmax-before-cross-entropy", msg, fix=fix, where="model output")
        r.verdict, r.summary = Verdict.FAIL, "NLLLoss on raw logits"
        r.fix = "use CrossEntropyLoss on the logits, or log_softmax + NLLLoss"
        return r
    if tgt.is_floating_point() and tgt.shape != out.shape:
        msg = (f"float targets of shape {tuple(tgt.shape)} for outputs {tuple(out.shape)}: class-index targets "
               "must be integers (torch.long).")
        fix = ("y.long().")
        r.find("wrong-loss-for-task", msg, fix=fix, where="targets")
        r.verdict, r.summary = Verdict.FAIL, "float targets that are not class probabilities"
        return r
    expected = math.log(classes)
    ratio = value / expected
    r.evidence.update(classes=classes, expected=expected, ratio=ratio)
    r.lines.append(f"expected for {classes} classes with uniform predictions: ln({classes}) = {expected:.4f}; "
                   f"measured/expected = {ratio:.2f}")
    r.summary = f"{value:.4f} vs ln({classes}) = {expected:.4f} (x{ratio:.2f})"
    if ratio > FAIL_HIGH:
        r.verdict = Verdict.FAIL
    elif not LOW <= ratio <= HIGH:
        r.verdict = Verdict.WARN
    if r.verdict is not Verdict.PASS:
        r.slugs.append("wrong-loss-for-task")
        if ratio > 1:
            r.causes += ["confidently wrong initial predictions: large initial weights or un-normalised inputs",
                         "a loss/target mismatch (labels shifted, wrong number of classes)"]
            r.fix = "normalise the inputs, use the default initialisation, and check the labels against the classes"
        else:
            r.causes += ["the untrained model already predicts the labels: leakage of the label into the inputs, "
                         "or a trained model was passed"]
            r.fix = "check that no feature encodes the label and that the model starts untrained"
    return r


def _are_probabilities(out: torch.Tensor) -> bool:
    x = out.detach().float()
    if x.dim() < 2 or x.numel() == 0:
        return False
    sums = x.sum(dim=1)
    return bool(x.min() >= 0 and x.max() <= 1 and torch.allclose(sums, torch.ones_like(sums), atol=1e-3))


def _explain_error(r: ProbeResult, kind: str, outputs: list[Any], targets: list[Any], exc: Exception) -> None:
    text = str(exc).lower()
    if "out of bounds" in text or ("target" in text and "out of" in text):
        r.find("label-out-of-range", f"the loss rejected a label: {exc}", where="loss call")
        r.fix = "make the output layer as wide as the number of classes, or remap the labels to 0..C-1"
    elif "expected scalar type long" in text or "not implemented for 'int'" in text or "dtype" in text:
        r.find("wrong-loss-for-task", f"the loss rejected the target dtype: {exc}", where="loss call")
        r.fix = "class-index targets must be torch.long (y.long()); probability targets float of the output's shape"
    elif "size" in text or "shape" in text:
        r.find("wrong-loss-for-task", f"the loss rejected the shapes of outputs and targets: {exc}",
               where="loss call")
        r.fix = "make the model's output and the target agree in shape (see the data probe's batch description)"
    else:
        r.fix = "fix the error shown (the loss could not be computed on a real batch)"


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return initial_loss(setup.model, setup.loss_fn, setup.batches(4), forward=setup.forward, device=setup.device)


def _blocks(r: ProbeResult) -> dict[str, str]:
    untrainable = {f.slug for f in r.findings} & {"wrong-loss-for-task", "label-out-of-range"}
    if r.verdict is Verdict.FAIL and untrainable:
        return {"loss": f"the loss cannot train on these targets (initial loss: {r.summary})"}
    return {}


PROBE = Probe("initial-loss", "Initial loss", 20, _run, needs=("forward",), blocks=_blocks)
