"""Probe 11 (opt-in, ``--lr-find``): learning-rate range test.  A copy trains while the learning
rate grows exponentially; the smoothed loss against the rate shows where learning is fastest."""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from overt.config import TrainConfig
from overt.doctor.common import Forward, default_forward
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.doctor.shortrun import (Objects, WindowLoss, as_configured, as_loader, epochs_for, kept_rng, probe_config,
                                   trained_as, trainer_for)

TESTS = "loss vs learning rate on an exponential sweep (a copy trains while the rate grows); a suggested rate"


class _Sweep(WindowLoss):
    """Sets every group's learning rate before each optimizer step, growing it by ``factor`` per step;
    records (rate, smoothed loss); stops on a non-finite or diverging loss."""

    def __init__(self, start_lr: float, factor: float, smoothing: float, diverge: float):
        super().__init__()
        self.lr, self.factor, self.smoothing, self.diverge = start_lr, factor, smoothing, diverge
        self.points: list[tuple[float, float]] = []
        self._avg, self._best = 0.0, math.inf

    def on_before_optimizer_step(self, trainer: Any) -> None:
        for g in trainer.optimizer.param_groups:
            g["lr"] = self.lr

    def on_loss(self, trainer: Any, value: float) -> None:
        if not math.isfinite(value):
            return  # (the run stops)
        i = len(self.points)
        self._avg = self.smoothing * self._avg + (1 - self.smoothing) * value
        smoothed = self._avg / (1 - self.smoothing ** (i + 1))
        self.points.append((self.lr, smoothed))
        self._best = min(self._best, smoothed)
        if smoothed > self.diverge * self._best and i > 10:
            trainer.should_stop = True
        self.lr *= self.factor


def lr_range_test(model: nn.Module, optimizer: Any, loss_fn: Any, loader: Any = None, *, dataset: Any = None,
                  forward: Forward | None = None,
                  device: Any = None, steps: int = 100, start_lr: float = 1e-7, end_lr: float = 10.0,
                  smoothing: float = 0.9, diverge: float = 4.0, config: TrainConfig | None = None,
                  collate_fn: Any = None) -> ProbeResult:
    """Probe 11 on its own: ``steps`` optimizer steps of overt's Trainer on a copy (``config``'s
    precision, accumulation and clipping; ``loader`` a DataLoader or a list of batches, or ``dataset`` a
    Dataset the Trainer batches as the run would)
    with the rate going from ``start_lr`` to ``end_lr`` geometrically; stops when the smoothed loss
    exceeds ``diverge`` x its minimum.  The suggestion is the rate of the steepest descent of the
    smoothed loss (in log-rate), capped at a tenth of the rate where the loss was lowest."""
    r = ProbeResult("lr-find", "Learning-rate range test", TESTS)
    forward = forward or default_forward
    cfg = probe_config(config, model, device)
    configured = float(optimizer.param_groups[0]["lr"])
    factor = (end_lr / start_lr) ** (1 / max(steps - 1, 1))
    sweep = _Sweep(start_lr, factor, smoothing, diverge)
    data = dataset if dataset is not None else as_loader(loader)
    objs = Objects(model, optimizer, loss_fn, data, forward=forward, collate_fn=collate_fn, config=cfg)
    with kept_rng():
        trainer, _ = trainer_for(objs, steps, callbacks=[sweep], scheduler=False, epochs=epochs_for(data, steps, cfg))
        trainer.fit()
    points = sweep.points
    r.evidence.update(trained_as(trainer))
    r.curves["lr_find"] = points
    r.evidence.update(configured_lr=configured, steps=len(points), start_lr=start_lr,
                      end_lr=points[-1][0] if points else start_lr)
    if len(points) < 10:
        r.verdict, r.summary = Verdict.WARN, f"the sweep diverged after {len(points)} steps: no suggestion"
        return r
    lrs = [math.log10(lr) for lr, _ in points]
    losses = [v for _, v in points]
    lowest = min(range(len(losses)), key=losses.__getitem__)
    end = max(lowest, 2)  # the steepest descent is looked for before the loss bottoms out
    slopes = [(losses[i + 1] - losses[i - 1]) / (lrs[i + 1] - lrs[i - 1]) for i in range(1, min(end, len(points) - 1))]
    steepest = min(range(len(slopes)), key=slopes.__getitem__) + 1
    suggested = min(points[steepest][0], points[lowest][0] / 10)
    r.evidence.update(suggested_lr=suggested, steepest_lr=points[steepest][0], lowest_loss_lr=points[lowest][0],
                      lowest_loss=losses[lowest])
    r.lines.append(f"{len(points)} steps from lr {start_lr:.0e} to {points[-1][0]:.2g} "
                   f"({type(optimizer).__name__}, configured lr {configured:.2g})")
    if as_configured(trainer):
        r.lines.append(as_configured(trainer))
    r.lines.append(f"steepest descent at lr {points[steepest][0]:.2g}; lowest smoothed loss {losses[lowest]:.4g} "
                   f"at lr {points[lowest][0]:.2g}; suggested lr {suggested:.2g}")
    r.summary = f"suggested lr {suggested:.2g} (configured {configured:.2g})"
    if configured > 10 * suggested or configured < suggested / 10:
        r.verdict = Verdict.WARN
        r.summary += ": the configured rate is more than 10x away"
        r.fix = f"try lr={suggested:.2g}"
    return r


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return lr_range_test(setup.model, setup.optimizer, setup.loss_fn, dataset=setup.train_data, forward=setup.forward,
                         device=setup.device, steps=setup.setting("lr_find_steps"), config=setup.cfg,
                         collate_fn=setup.collate_fn)


def _risks(readiness: Any, r: ProbeResult) -> list[tuple[int, str]]:
    sug, conf = r.evidence.get("suggested_lr"), r.evidence.get("configured_lr")
    if sug and conf and (conf > 10 * sug or conf < sug / 10):
        return [(80, f"Learning rate: configured {conf:.2g}, the range test suggests {sug:.2g}; a long run at the "
                     f"configured rate is likely to {'diverge' if conf > sug else 'crawl'}.")]
    return []


PROBE = Probe("lr-find", "Learning-rate range test", 110, _run, needs=("forward", "loss"), opt_in="lr_find",
              risks=_risks,
              settings={"lr_find": False, "lr_find_steps": 100})
