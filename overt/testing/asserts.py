"""The assertions: each runs one of the doctor's probes (or a short engine run) on copies of the
subject and raises ``AssertionError`` with the evidence when it fails."""

from __future__ import annotations

import math
from typing import Any

from overt.testing.subject import Subject, subject


def _fail(title: str, probe: Any) -> None:
    """Raise with a probe result's summary, measurements, causes and fix."""
    lines = [f"{title}: {probe.summary}"]
    lines += [f"  - {line}" for line in probe.lines]
    if probe.causes:
        lines.append("  likely causes:")
        lines += [f"    * {cause}" for cause in probe.causes]
    if probe.fix:
        lines.append(f"  fix: {probe.fix}")
    if probe.slugs:
        lines.append(f"  catalog: {', '.join(probe.slugs)} (docs/catalog.md)")
    raise AssertionError("\n".join(lines))


def _failed(probe: Any) -> bool:
    from overt.doctor.result import Verdict

    return probe.verdict is not Verdict.PASS


def assert_loss_decreases(target: Any, optimizer: Any = None, loss_fn: Any = None, data: Any = None, *,
                          steps: int = 30, max_ratio: float = 0.9, **settings: Any) -> list[float]:
    """Train a copy with overt's engine for ``steps`` optimizer steps (guards off, nothing written);
    pass when the mean loss of the last quarter of the steps is at most ``max_ratio`` times the mean of
    the first quarter.  Returns the per-step losses.  ``target``: see :func:`overt.testing.subject`."""
    from overt.doctor.shortrun import run

    subj = target if isinstance(target, Subject) else subject(target, optimizer, loss_fn, data, **settings)
    epochs = _epochs_for(subj, steps)
    losses, _, _ = run(subj.objects(), steps, epochs=epochs)
    quarter = max(1, len(losses) // 4)
    first, last = sum(losses[:quarter]) / quarter, sum(losses[-quarter:]) / quarter
    if len(losses) >= 2 and math.isfinite(last) and last <= first * max_ratio:
        return losses
    shown = ", ".join(f"{v:.4g}" for v in losses[:: max(1, len(losses) // 10)])
    raise AssertionError(
        f"the training loss did not decrease: mean of the first {quarter} steps {first:.4g}, "
        f"of the last {quarter} {last:.4g} (needed at most x{max_ratio} after {len(losses)} steps)\n"
        f"  - losses along the way: {shown}\n"
        "  likely causes:\n"
        "    * parameters the optimizer does not hold, or gradients that never reach them\n"
        "    * gradients not reset between steps, or reset between backward() and step()\n"
        "    * a loss that does not fit the targets, or a learning rate far off\n"
        "  fix: run `overt doctor` on the same recipe for the probe that pins it down\n"
        "  catalog: params-not-optimized, no-gradient, stale-gradients, wrong-loss-for-task, loss-not-decreasing")


def _epochs_for(subj: Subject, steps: int) -> int:
    """Enough epochs for ``steps`` optimizer steps, so that a schedule sized by the run spans the test."""
    try:
        n = len(subj.train_data)
    except TypeError:
        return max(subj.config.epochs, 1)
    per_epoch = max(1, math.ceil(math.ceil(n / subj.config.batch_size) / subj.config.accumulate))
    return max(1, math.ceil(steps / per_epoch))


def assert_overfits_batch(target: Any, optimizer: Any = None, loss_fn: Any = None, data: Any = None, *,
                          steps: int = 300, batch_size: int = 16, target_ratio: float = 0.1,
                          time_limit_s: float = 20.0, **settings: Any) -> Any:
    """A copy trained on one fixed batch of ``batch_size`` samples must drive its loss (measured in eval
    mode) to ``target_ratio`` of its start within ``steps`` steps: the doctor's overfit probe."""
    from overt.doctor.probes.overfit import overfit_batch

    subj = target if isinstance(target, Subject) else subject(target, optimizer, loss_fn, data, **settings)
    probe = overfit_batch(subj.model, subj.optimizer, subj.loss_fn, subj.first_batch(), forward=subj.forward,
                          steps=steps, batch_size=batch_size, target_ratio=target_ratio, time_limit_s=time_limit_s,
                          config=subj.config)
    if _failed(probe):
        _fail("the model cannot overfit one batch", probe)
    return probe


def assert_deterministic(target: Any, optimizer: Any = None, loss_fn: Any = None, data: Any = None, *,
                         steps: int = 5, **settings: Any) -> Any:
    """Two short runs of overt's engine with the same seed must give identical losses and weights:
    the doctor's determinism probe."""
    from overt.doctor.probes.determinism import determinism

    subj = target if isinstance(target, Subject) else subject(target, optimizer, loss_fn, data, **settings)
    probe = determinism(subj.objects(), steps=steps)
    if _failed(probe):
        _fail("two runs with the same seed differ", probe)
    return probe


def assert_checkpoint_roundtrip(target: Any, optimizer: Any = None, loss_fn: Any = None, data: Any = None,
                                **settings: Any) -> Any:
    """Save a trained copy with :class:`overt.Checkpointer` and load it into a freshly built model (a
    recipe's own ``build``; for plain objects, a copy whose weights were changed first): the outputs
    and the optimizer state must be identical.  The doctor's checkpoint round-trip probe."""
    from overt.doctor.probes.checkpoint import checkpoint_roundtrip

    subj = target if isinstance(target, Subject) else subject(target, optimizer, loss_fn, data, **settings)
    probe = checkpoint_roundtrip(subj.model, subj.optimizer, subj.first_batch(), subj.loss_fn,
                                 build=subj.rebuild, forward=subj.forward, config=subj.config)
    if _failed(probe):
        _fail("the checkpoint does not restore the model", probe)
    return probe
