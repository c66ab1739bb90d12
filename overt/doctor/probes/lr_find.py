"""Probe 11 (opt-in, ``--lr-find``): learning-rate range test.  A copy trains while the learning
rate grows exponentially; the smoothed loss against the rate shows where learning is fastest."""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from overt.doctor.common import Forward, default_forward, device_of, fresh, to
from overt.doctor.result import ProbeResult, Verdict

TESTS = "loss vs learning rate on an exponential sweep (a copy trains while the rate grows); a suggested rate"


def lr_range_test(model: nn.Module, optimizer: Any, loss_fn: Any, loader: Any, *, forward: Forward | None = None,
                  device: Any = None, steps: int = 100, start_lr: float = 1e-7, end_lr: float = 10.0,
                  smoothing: float = 0.9, diverge: float = 4.0) -> ProbeResult:
    """Probe 11 on its own: ``steps`` steps with the rate going from ``start_lr`` to ``end_lr``
    geometrically; stops when the smoothed loss exceeds ``diverge`` x its minimum.  The suggestion is
    the rate of the steepest descent of the smoothed loss (in log-rate), capped at a tenth of the
    rate where the loss was lowest."""
    r = ProbeResult("lr-find", "Learning-rate range test", TESTS)
    forward = forward or default_forward
    m, opt, _ = fresh(model, optimizer)
    device = device_of(m, device)
    m.to(device).train()
    configured = float(optimizer.param_groups[0]["lr"])
    factor = (end_lr / start_lr) ** (1 / max(steps - 1, 1))
    points: list[tuple[float, float]] = []
    avg, best = 0.0, math.inf
    it = iter(loader)
    lr = start_lr
    for i in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        for g in opt.param_groups:
            g["lr"] = lr
        batch = to(batch, device)
        opt.zero_grad(set_to_none=True)
        output, target = forward(m, batch)
        loss = loss_fn(output, target)
        loss.backward()
        opt.step()
        value = float(loss.detach())
        if not math.isfinite(value):
            break
        avg = smoothing * avg + (1 - smoothing) * value
        smoothed = avg / (1 - smoothing ** (i + 1))
        points.append((lr, smoothed))
        best = min(best, smoothed)
        if smoothed > diverge * best and i > 10:
            break
        lr *= factor
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
    r.lines.append(f"steepest descent at lr {points[steepest][0]:.2g}; lowest smoothed loss {losses[lowest]:.4g} "
                   f"at lr {points[lowest][0]:.2g}; suggested lr {suggested:.2g}")
    r.summary = f"suggested lr {suggested:.2g} (configured {configured:.2g})"
    if configured > 10 * suggested or configured < suggested / 10:
        r.verdict = Verdict.WARN
        r.summary += ": the configured rate is more than 10x away"
        r.fix = f"try lr={suggested:.2g}"
    return r
