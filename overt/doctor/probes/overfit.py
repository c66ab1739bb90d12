"""Probe 5, overfit one small batch: a copy of the model and optimizer trained on one fixed
small batch.  A correct setup memorises it; one that cannot has a loop, loss, label or
optimizer problem that more data will not fix."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import nn

from overt.doctor.common import Forward, cut, cycle, default_forward, device_of, fresh, samples, to, train_steps
from overt.doctor.result import ProbeResult, Verdict

TESTS = "capacity and loop mechanics: a copy trained on one fixed small batch must drive its loss near zero"

#: final/initial loss at or below PASS_RATIO passes; at or below WARN_RATIO warns; above it fails
PASS_RATIO, WARN_RATIO = 0.1, 0.5


def overfit_batch(model: nn.Module, optimizer: Any, loss_fn: Any, batch: Any, *, forward: Forward | None = None,
                  steps: int = 300, time_limit_s: float = 10.0, batch_size: int | None = 16,
                  device: Any = None, target_ratio: float = PASS_RATIO) -> ProbeResult:
    """Probe 5 on its own: train copies of ``model``/``optimizer`` on the first ``batch_size`` samples
    of ``batch`` for up to ``steps`` steps or ``time_limit_s`` seconds; pass when the loss (measured
    in eval mode) falls to ``target_ratio`` of its start or below."""
    r = ProbeResult("overfit-batch", "Overfit one small batch", TESTS)
    forward = forward or default_forward
    probe, opt, _ = fresh(model, optimizer)
    device = device_of(probe, device)
    probe.to(device)
    fixed = to(cut(batch, batch_size) if batch_size else batch, device)
    n = samples(fixed)
    start_loss, start_acc = _measure(probe, loss_fn, fixed, forward)
    t0 = time.perf_counter()
    curve: list[float] = []
    chunk = 25
    while len(curve) < steps and time.perf_counter() - t0 < time_limit_s:
        curve += train_steps(probe, opt, loss_fn, cycle([fixed]), forward=forward, device=device,
                             steps=min(chunk, steps - len(curve)), time_limit_s=time_limit_s)
        if not math.isfinite(curve[-1]):
            break
        if curve[-1] <= start_loss * target_ratio * 0.1 or curve[-1] < 1e-4:
            break  # memorised (in train mode): confirm in eval mode below
    seconds = time.perf_counter() - t0
    end_loss, end_acc = _measure(probe, loss_fn, fixed, forward)
    r.curves["overfit"] = curve
    ratio = end_loss / start_loss if start_loss > 0 and math.isfinite(end_loss) else float("nan")
    lr = [g.get("lr") for g in getattr(optimizer, "param_groups", [])]
    r.evidence.update(samples=n, steps=len(curve), seconds=round(seconds, 3), start_loss=start_loss,
                      end_loss=end_loss, ratio=ratio, lr=lr[0] if len(set(map(str, lr))) == 1 else lr)
    if start_acc is not None:
        r.evidence.update(start_accuracy=start_acc, end_accuracy=end_acc)
    r.lines.append(f"{n} samples, {len(curve)} steps in {seconds:.2f} s with {type(optimizer).__name__} "
                   f"(lr {r.evidence['lr']}): loss {start_loss:.4g} -> {end_loss:.4g} (eval mode)"
                   + (f", batch accuracy {start_acc:.0%} -> {end_acc:.0%}" if start_acc is not None else ""))
    curve_text = ", ".join(f"{v:.3g}" for v in curve[:: max(1, len(curve) // 8)])
    r.lines.append(f"training loss along the way: {curve_text}")
    if not math.isfinite(end_loss) or (curve and not math.isfinite(curve[-1])):
        r.find("non-finite", f"the loss became non-finite after {len(curve)} steps on one fixed batch: the learning "
               f"rate ({r.evidence['lr']}) is too high or the model produces NaN/inf.", where="overfit run")
        r.verdict, r.summary = Verdict.FAIL, f"loss became non-finite after {len(curve)} steps"
        r.fix = "lower the learning rate; check forward for log/sqrt/division of zero"
        return r
    r.summary = f"loss {start_loss:.4g} -> {end_loss:.4g} (x{ratio:.3f}) in {len(curve)} steps, {seconds:.1f} s"
    if end_acc is not None:
        r.summary += f", batch accuracy {end_acc:.0%}"
    if ratio <= target_ratio:
        return r
    r.verdict = Verdict.WARN if ratio <= WARN_RATIO else Verdict.FAIL
    r.slugs += ["loss-not-decreasing", "params-not-updating", "wrong-loss-for-task"]
    r.causes += ["a loss that does not fit the targets (e.g. MSE on class indices, softmax before cross-entropy)",
                 "parameters the optimizer does not hold, or gradients that do not reach them",
                 "a learning rate far too low (or too high) for this optimizer",
                 "labels that do not belong to their inputs (a shuffled or misaligned target)"]
    r.fix = ("fix the failures of the optimizer and gradient probes first; then try a 10x larger learning rate "
             "on this batch; a model that cannot memorise 16 samples will not learn from more")
    if len(curve) < steps:
        r.lines.append(f"stopped by the time limit ({time_limit_s:.0f} s) after {len(curve)} of {steps} steps")
    return r


def _measure(model: nn.Module, loss_fn: Any, batch: Any, forward: Forward) -> tuple[float, float | None]:
    training = model.training
    model.eval()
    with torch.no_grad():
        output, target = forward(model, batch)
        loss = float(loss_fn(output, target).float())
        acc = None
        if (isinstance(output, torch.Tensor) and isinstance(target, torch.Tensor) and output.dim() == 2
                and not target.is_floating_point() and target.dim() == 1):
            acc = float((output.argmax(dim=1) == target).float().mean())
    model.train(training)
    return loss, acc
