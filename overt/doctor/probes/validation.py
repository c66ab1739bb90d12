"""Probe 6, validation twice: two evaluations of the same data must give identical
predictions (dropout left on or hidden randomness breaks that), and how much eval mode
changes the model's outputs compared with training mode."""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import nn

from overt.doctor.common import Forward, default_forward, device_of, to
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.engine.evaluate import eval_mode

TESTS = ("deterministic inference: two evaluations of the same batches give identical predictions; "
         "what eval mode changes compared with training mode")

_MODAL = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)


def modal_layers(model: nn.Module) -> list[str]:
    """Names of the submodules that behave differently in train and eval mode (dropout, batch norm)."""
    return [f"{name or type(model).__name__} ({type(m).__name__})" for name, m in model.named_modules()
            if isinstance(m, _MODAL)]


def validation_twice(model: nn.Module, batches: list[Any], *, forward: Forward | None = None, device: Any = None,
                     validate: Callable[[nn.Module, Any], Any] | None = None, data: Any = None) -> ProbeResult:
    """Probe 6 on its own.  Without ``validate``: the engine's evaluation (``eval()`` +
    ``inference_mode``) of ``batches`` twice on a copy of ``model``.  With ``validate(model, data)``
    (your own validation code): it runs twice on copies, and the modes it ran the model in are recorded."""
    r = ProbeResult("validation", "Validation twice", TESTS)
    forward = forward or default_forward
    base = copy.deepcopy(model)
    device = device_of(base, device)
    base.to(device)
    modal = modal_layers(base)
    r.evidence["mode_dependent_layers"] = modal
    if validate is not None:
        return _user_validation(r, base, validate, data, modal)
    moved = [to(b, device) for b in batches]
    first, second = _predict(base, moved, forward), _predict(base, moved, forward)
    n = sum(len(o) for o in first)
    r.evidence["samples"] = n
    same = all(torch.equal(a, b) for a, b in zip(first, second))
    diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(first, second)) if first else 0.0
    r.lines.append(f"{n} samples evaluated twice under model.eval() + torch.inference_mode(): "
                   + ("identical outputs" if same else f"outputs differ (max |diff| {diff:.3g})"))
    if not same:
        r.find("train-mode-in-eval",
               f"two evaluations of the same {n} samples in eval mode give different outputs (max |diff| "
               f"{diff:.3g}): something in forward() is random at inference, e.g. F.dropout(x, p) (its training "
               f"argument defaults to True), torch.rand/randn in forward, or a submodule eval() cannot reach.",
               fix="F.dropout(x, p, training=self.training), or an nn.Dropout layer.", where="model forward")
        r.verdict, r.summary = Verdict.FAIL, f"eval-mode outputs differ between two passes (max |diff| {diff:.3g})"
        r.causes.append("randomness in forward() that ignores self.training")
        r.fix = "make every random operation in forward depend on self.training (use nn.Dropout)"
    _train_vs_eval(r, base, moved, forward, modal, first)
    if same:
        r.summary = f"{n} samples, two eval passes identical" + (
            f"; train mode changes {r.evidence['train_eval_changed']:.1%} of predictions" if "train_eval_changed" in
            r.evidence else "")
    return r


def _predict(model: nn.Module, batches: list[Any], forward: Forward) -> list[torch.Tensor]:
    outs = []
    with eval_mode(model), torch.inference_mode():
        for batch in batches:
            output, _ = forward(model, batch)
            outs.append(output.detach().clone() if isinstance(output, torch.Tensor) else torch.as_tensor(output))
    return outs


def _train_vs_eval(r: ProbeResult, model: nn.Module, batches: list[Any], forward: Forward, modal: list[str],
                   eval_out: list[torch.Tensor]) -> None:
    if not modal:
        r.lines.append("no dropout or batch-norm layers: training and eval mode compute the same function")
        return
    probe = copy.deepcopy(model).train()  # batch norm updates its statistics in train mode: use a copy
    with torch.no_grad():
        train_out = [forward(probe, b)[0] for b in batches]
    n = sum(len(o) for o in eval_out)
    diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(train_out, eval_out))
    r.evidence["train_eval_max_diff"] = diff
    changed = None
    if eval_out and eval_out[0].dim() == 2 and eval_out[0].shape[1] > 1:
        changed = sum(int((a.argmax(1) != b.argmax(1)).sum()) for a, b in zip(train_out, eval_out)) / max(n, 1)
        r.evidence["train_eval_changed"] = changed
    r.lines.append(f"training vs eval mode ({', '.join(modal[:4])}{'...' if len(modal) > 4 else ''}): max |diff| "
                   f"{diff:.3g}" + (f", {changed:.1%} of predicted classes change" if changed is not None else "")
                   + ": a validation loop without model.eval() would report these noisier numbers")


def _user_validation(r: ProbeResult, base: nn.Module, validate: Callable[[nn.Module, Any], Any], data: Any,
                     modal: list[str]) -> ProbeResult:
    seen: list[tuple[str, bool, bool]] = []
    results = []
    for _ in range(2):
        probe = copy.deepcopy(base)  # each pass from the same state (a batch norm in train mode would drift)
        handles = [m.register_forward_pre_hook(_recorder(f"{name} ({type(m).__name__})" if name else
                                                         type(probe).__name__, seen))
                   for name, m in probe.named_modules() if isinstance(m, _MODAL) or m is probe]
        try:
            results.append(validate(probe, data))
        finally:
            for h in handles:
                h.remove()
    same = _equal(results[0], results[1])
    r.evidence["validate"] = getattr(validate, "__qualname__", repr(validate))
    training = sorted({name for name, train, _ in seen if train and name != type(base).__name__})
    grad = any(g for _, _, g in seen)
    r.lines.append(f"your validation function `{r.evidence['validate']}` ran twice: "
                   + ("identical results" if same else "different results"))
    problems, warnings = [], []
    if training:
        r.find("train-mode-in-eval",
               f"your validation ran {', '.join(training[:4])} in training mode: dropout stays active and batch "
               f"norm uses and updates batch statistics, so validation metrics are noisy and wrong"
               + ("" if same else " (the two passes gave different results)")
               + ".", fix="call model.eval() before validating and model.train() after.", where=r.evidence["validate"])
        problems.append(f"validation runs {len(training)} dropout/batch-norm layer(s) in training mode")
    elif not same:
        r.find("train-mode-in-eval", "your validation function gives different results on the same data twice: "
               "hidden randomness at inference.", fix="make every random operation depend on self.training.",
               where=r.evidence["validate"])
        problems.append("two validation passes give different results")
    if grad:
        r.find("graph-in-eval", "your validation runs the model with gradients enabled: autograd graphs are built "
               "for nothing (more memory, slower).", fix="wrap it in torch.no_grad() or torch.inference_mode().",
               where=r.evidence["validate"])
        warnings.append("validation builds autograd graphs (no torch.no_grad())")
    if problems:
        r.verdict, r.summary = Verdict.FAIL, "; ".join(problems + warnings)
    elif warnings:
        r.verdict, r.summary = Verdict.WARN, "; ".join(warnings)
    else:
        r.summary = "your validation is deterministic, in eval mode and without autograd"
    r.fix = "model.eval() and torch.no_grad() around validation; model.train() before training resumes"
    return r


def _recorder(name: str, seen: list[tuple[str, bool, bool]]) -> Callable[..., None]:
    def hook(module: nn.Module, args: Any) -> None:
        seen.append((name, module.training, torch.is_grad_enabled()))
    return hook


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a.detach().cpu(), b.detach().cpu())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    data = setup.val_data if setup.val_data is not None else setup.train_data
    result = validation_twice(setup.model, setup.val_batches(4), forward=setup.forward, device=setup.device,
                              validate=setup.validate, data=data)
    if setup.val_data is None:
        result.lines.append("no validation data was given: checked on training batches")
    return result


def _section(readiness: Any, v: ProbeResult) -> list[str]:
    """The note's "How validation differs from training"."""
    if v.verdict is Verdict.SKIPPED:
        return []
    e = v.evidence
    lines = ["## How validation differs from training", ""]
    lines.append(f"- Validation runs {readiness.setup.get('validation')}; training runs `model.train()` with "
                 f"autograd on.")
    modal = e.get("mode_dependent_layers") or []
    if modal:
        changed = e.get("train_eval_changed")
        lines.append(f"- {len(modal)} layer(s) behave differently in the two modes ({', '.join(modal[:6])}). "
                     f"Measured on {e.get('samples', 'the')} validation samples: outputs differ by up to "
                     f"{e.get('train_eval_max_diff', float('nan')):.3g} between train and eval mode"
                     + (f", and {changed:.1%} of the predicted classes change." if changed is not None else "."))
    else:
        lines.append("- The model has no dropout or batch-norm layers: train and eval mode compute the same "
                     "function; the difference is only that validation builds no autograd graph.")
    lines.append("- Two validation passes over the same data gave "
                 + ("identical results." if v.verdict is Verdict.PASS else f"a problem: {v.summary}."))
    return lines + [""]


PROBE = Probe("validation", "Validation twice", 60, _run, needs=("forward",), section=_section)
