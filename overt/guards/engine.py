"""The guards as an engine callback (added to the engine's default callbacks)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from overt.engine.callbacks import Callback
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from overt.guards.setup import check_setup
from overt.guards.trends import EpochTrends

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class GuardCallback(Callback):
    """Runs the runtime guards inside :class:`overt.Trainer`.

    Findings go to stderr as found and to ``summary["findings"]`` at the end
    (and to ``report_path`` as JSON when given).  Stale or non-finite gradients
    raise :class:`overt.guards.GuardError` before the optimizer step.

    The warm-up is 3 checked steps here (5 for :func:`overt.guard` and ``overt run``): the
    engine's own loop cannot misplace ``zero_grad`` or ``step``, which is what the longer
    warm-up of a hand-written loop is for, and every checked step costs about as much as a
    plain step of a tiny model.
    """

    def __init__(self, *, strict: bool = False, ignore: Sequence[str] = (), report_path: str | None = None,
                 check_every: int = 50, warmup_steps: int = 3, overhead_budget: float | None = None):
        self.options = GuardOptions(strict=strict, ignore=frozenset(ignore), report_path=report_path,
                                    check_every=check_every, warmup_steps=warmup_steps,
                                    overhead_budget=overhead_budget)
        self.session: GuardSession | None = None
        self.trends: EpochTrends | None = None

    def on_fit_start(self, trainer: Trainer) -> None:
        if self.session is not None and not self.session.closed:
            self.session.close()
        options = self.options
        if not trainer.parallel.is_main:  # other ranks stay silent: rank 0 reports their findings at the end
            import dataclasses
            import io

            options = dataclasses.replace(options, stream=io.StringIO())
        self.session = GuardSession(options)
        self.session.explain_loss_errors = False  # the engine explains a failing loss itself
        self.session.engine_loop = True  # the engine's loop resets gradients and evaluates correctly itself
        self.session.watch_model(trainer.model)
        self.session.watch_optimizer(trainer.optimizer)
        self.session.scheds.add(trainer.scheduler)
        # batch indices come from the patched DataLoader iterator (no per-batch callback: it
        # would cost every step); for any other iterable of batches, from the engine's state
        state = trainer.state
        self.session.batch_source = lambda: state.batch_index
        # findings carry the run's step: the session counts the optimizer steps it saw (from zero in a
        # resumed run too: its warm-up starts again), so the steps done before this fit are added
        self.session.step_offset = state.global_step
        check_setup(self.session, trainer)
        self.trends = EpochTrends(self.session, monitor=trainer.config.monitor, monitor_mode=trainer.config.monitor_mode)

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        """Validation trends (overfitting, a collapsed metric) from the epoch's metrics, already on the host."""
        if self.session is not None and self.trends is not None:
            try:
                lrs = [g.get("lr") for g in trainer.optimizer.param_groups]
                lr = max((float(x) for x in lrs if isinstance(x, (int, float))), default=None)  # host floats
                self.trends.epoch_end(epoch, metrics, lr=lr)
            except Exception as exc:  # never break training
                self.session.check_failed("trends", exc)

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        """The engine reads the interval's mean loss at every log point anyway: a non-finite
        one is caught there for free, at most ``log_every`` steps after it appeared (the
        sampled checks may be further apart)."""
        loss = logs.get("train/loss")
        if self.session is None or loss is None or math.isfinite(loss):
            return
        step = int(logs["step"])
        first = step - trainer.config.log_every + 1
        self.session.stop(
            "non-finite",
            f"the mean training loss of optimizer steps {max(first, 1)}-{step} is {loss}: a NaN/inf loss "
            "gives NaN/inf gradients, and the weights may already hold them.",
            fix="look for NaN/inf in the "
            "inputs or labels, log/sqrt/division of zero in the loss, a learning rate that is too high "
            "(lower it, or set clip_grad_norm), or fp16 overflow (use precision=bf16).",
            where=f"training loss, steps {max(first, 1)}-{step}, epoch {int(logs['epoch'])}",
            key="engine-train-loss",
        )

    def on_validation_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        """A non-finite validation loss or metric means the model (or the validation data) holds
        NaN/inf: stop, instead of tracking it as the epoch's result."""
        bad = {k: v for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)}
        if self.session is None or not bad:
            return
        names = ", ".join(f"{k}={v}" for k, v in bad.items())
        self.session.stop(
            "non-finite",
            f"validation after epoch {trainer.state.epoch + 1} gave {names}: the weights or the validation "
            "data hold NaN/inf, so this epoch's result (and any best model chosen by it) is meaningless.",
            fix="look for NaN/inf in the validation inputs or labels, and for a learning rate that is too "
            "high (lower it, or set clip_grad_norm).",
            where=f"validation, epoch {trainer.state.epoch}, step {trainer.state.global_step}",
            key="engine-val-loss",
        )

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        if self.session is not None:
            self.session.close(error=error)
            if self.options.report_path:  # a failed run's findings (e.g. the guard that stopped it) are kept too
                try:
                    self.session.reporter.write(self.options.report_path)
                except Exception as exc:  # noqa: BLE001 - (a full disk) must not hide the error being handled
                    import sys

                    print(f"overt: the guards' findings could not be written to {self.options.report_path} "
                          f"({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if self.session is None:
            return
        from overt.guards.distributed import gather_findings
        findings = self.session.close()
        if trainer.parallel.world_size > 1:  # a collective: every rank's findings, merged on rank 0, each naming its ranks
            gathered = gather_findings(findings)
            if gathered is not None:
                from overt.guards.report import PREFIX

                for finding in gathered:  # the other ranks' own findings are printed here, once
                    if finding.details.get("ranks") != [0]:
                        print(PREFIX + finding.format(), file=self.options.out(), flush=True)
                findings = self.session.reporter.findings = gathered
        summary["findings"] = [f.to_dict() for f in findings]
        if self.options.report_path:
            try:
                self.session.reporter.write(self.options.report_path)
            except Exception as exc:
                from overt.run.atomic import is_disk_full

                if is_disk_full(exc):
                    from overt.errors import DiskFullError

                    raise DiskFullError("the guards' findings (guards.json)", self.options.report_path) from None
                raise
