"""Probe 5, overfit one small batch: a copy of the model and optimizer trained on one fixed
small batch.  A correct setup memorises it; one that cannot has a loop, loss, label or
optimizer problem that more data will not fix."""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import torch
from torch import nn

from overt.config import TrainConfig
from overt.doctor.common import Forward, cut, default_forward, samples, to
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.doctor.shortrun import (Objects, WindowLoss, as_configured, fixed_batches, kept_rng, probe_config,
                                   trained_as, trainer_for)

TITLE = "Overfit one small batch"
TESTS = "capacity and loop mechanics: a copy trained on one fixed small batch must drive its loss near zero"

#: final/initial loss at or below PASS_RATIO passes; at or below WARN_RATIO warns; above it fails
PASS_RATIO, WARN_RATIO = 0.1, 0.5
#: the training loss is checked for "memorised" every CHUNK steps
CHUNK = 25


def overfit_batch(model: nn.Module, optimizer: Any, loss_fn: Any, batch: Any, *, forward: Forward | None = None,
                  steps: int = 300, time_limit_s: float = 60.0, batch_size: int | None = 16,
                  device: Any = None, target_ratio: float = PASS_RATIO, config: TrainConfig | None = None
                  ) -> ProbeResult:
    """Probe 5 on its own: overt's Trainer trains copies of ``model``/``optimizer`` on the first
    ``batch_size`` samples of ``batch`` (every micro-batch) for up to ``steps`` optimizer steps or
    ``time_limit_s`` seconds, with ``config``'s precision, accumulation and clipping; pass when the
    loss (measured in eval mode) falls to ``target_ratio`` of its start or below."""
    from overt.engine.device import pick_device

    r = ProbeResult("overfit-batch", TITLE, TESTS)
    forward = forward or default_forward
    cfg = probe_config(config, model, device)
    fixed = to(cut(batch, batch_size) if batch_size else batch, pick_device(cfg.device))
    n = samples(fixed)
    watch = _Memorised(time_limit_s)
    objs = Objects(model, optimizer, loss_fn, None, forward=forward, config=cfg)
    with kept_rng():
        trainer, _ = trainer_for(objs, steps, data=fixed_batches(fixed, steps, cfg), callbacks=[watch],
                                 scheduler=False, epochs=1)
        start_loss, start_acc = _measure(trainer.model, loss_fn, fixed, forward, trainer.precision)
        watch.target = start_loss * target_ratio * 0.1
        trainer.fit()
        end_loss, end_acc = _measure(trainer.model, loss_fn, fixed, forward, trainer.precision)
    seconds, curve = watch.seconds, watch.losses
    r.curves["overfit"] = curve
    ratio = end_loss / start_loss if start_loss > 0 and math.isfinite(end_loss) else float("nan")
    lr = [g.get("lr") for g in getattr(optimizer, "param_groups", [])]
    r.evidence.update(samples=n, steps=len(curve), seconds=round(seconds, 3), start_loss=start_loss,
                      end_loss=end_loss, ratio=ratio, lr=lr[0] if len(set(map(str, lr))) == 1 else lr,
                      **trained_as(trainer))
    if start_acc is not None:
        r.evidence.update(start_accuracy=start_acc, end_accuracy=end_acc)
    r.lines.append(f"{n} samples, {len(curve)} steps in {seconds:.2f} s with {type(optimizer).__name__} "
                   f"(lr {r.evidence['lr']}): loss {start_loss:.4g} -> {end_loss:.4g} (eval mode)"
                   + (f", batch accuracy {start_acc:.0%} -> {end_acc:.0%}" if start_acc is not None else ""))
    if as_configured(trainer):
        r.lines.append(as_configured(trainer))
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
    if watch.timed_out and math.isfinite(ratio) and ratio < 1.0:
        # the clock stopped a run whose loss was still falling: how far it would have gone is not
        # known, so no cause is named (a slower machine must not turn a correct model into a finding)
        r.verdict = Verdict.WARN
        r.summary += f": stopped by the time limit ({time_limit_s:g} s) after {len(curve)} of {steps} steps"
        r.lines.append(f"inconclusive: the time limit ({time_limit_s:g} s) stopped the run after {len(curve)} of "
                       f"{steps} steps while the loss was still falling; nothing is concluded about the model")
        r.fix = (f"give the probe more time (overfit_time_s={max(2 * time_limit_s, 60):g}) or fewer steps "
                 "(overfit_steps=...); on a busy machine run the doctor again")
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


class _Memorised(WindowLoss):
    """Stops when the training loss is memorised (checked every :data:`CHUNK` steps), non-finite, or
    the time is up."""

    def __init__(self, time_limit_s: float):
        super().__init__()
        self.time_limit_s, self.target, self.seconds = time_limit_s, 0.0, 0.0
        self._t0 = 0.0
        self.timed_out = False  # the time limit, not the step count or memorisation, ended the run

    def on_fit_start(self, trainer: Any) -> None:
        self._t0 = time.perf_counter()

    def on_loss(self, trainer: Any, value: float) -> None:
        self.seconds = time.perf_counter() - self._t0
        if self.seconds > self.time_limit_s:
            trainer.should_stop = self.timed_out = True
        if len(self.losses) % CHUNK == 0 and (value <= self.target or value < 1e-4):
            trainer.should_stop = True  # memorised (in train mode): confirmed in eval mode after


def _measure(model: nn.Module, loss_fn: Any, batch: Any, forward: Forward, precision: Any = None
             ) -> tuple[float, float | None]:
    """Loss (and accuracy, for class targets) on ``batch`` in eval mode, under the run's autocast."""
    training = model.training
    model.eval()
    with torch.no_grad(), (precision.autocast() if precision is not None else contextlib.nullcontext()):
        output, target = forward(model, batch)
        loss = float(loss_fn(output, target).float())
        acc = None
        if (isinstance(output, torch.Tensor) and isinstance(target, torch.Tensor) and output.dim() == 2
                and not target.is_floating_point() and target.dim() == 1):
            acc = float((output.argmax(dim=1) == target).float().mean())
    model.train(training)
    return loss, acc


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return overfit_batch(setup.model, setup.optimizer, setup.loss_fn, setup.batches(1)[0], forward=setup.forward,
                         steps=setup.setting("overfit_steps"), time_limit_s=setup.setting("overfit_time_s"),
                         batch_size=setup.setting("overfit_samples"), device=setup.device, config=setup.cfg)


def _risks(readiness: Any, r: ProbeResult) -> list[tuple[int, str]]:
    e = r.evidence
    if r.verdict is Verdict.SKIPPED or not e.get("steps") or e.get("ratio") is None or not e["ratio"] > 0.01:
        return []  # (a NaN ratio, from a non-finite loss, is not a speed)
    return [(60, f"Optimisation speed: memorising {e['samples']} samples took {e['steps']} steps and ended at "
                 f"{e['ratio']:.1%} of the starting loss; if the full run learns slowly, the learning rate "
                 f"({e.get('lr')}) is the first thing to tune (`overt doctor --lr-find`).")]


PROBE = Probe("overfit-batch", TITLE, 50, _run, needs=("forward", "loss"), risks=_risks,
              settings={"overfit_samples": 16, "overfit_steps": 300, "overfit_time_s": 60.0})
