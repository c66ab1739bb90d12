"""overt's runtime guards as a PyTorch Lightning callback (the ``lightning`` extra).

Two lines::

    from overt.integrations.lightning import OvertCallback
    trainer = L.Trainer(..., callbacks=[OvertCallback()])

The guards watch the modules your ``training_step`` really calls (found during the first
training batch: ``self(x)``, ``self.net(x)``, ...) and the optimizers of
``configure_optimizers`` (automatic or manual optimisation), with the same checks as
``overt.guard`` and ``overt train``.  Findings are printed to stderr as they are found (rank
0), logged to every logger of the trainer as ``overt/findings`` / ``overt/errors`` at the
trainer's ``global_step`` (TensorBoard also gets their text), and written to
``guards.json`` in the trainer's log directory (``trainer.log_dir``, else
``default_root_dir``) when training ends.  ``callback.findings`` holds them too.

Nothing raises into training: with ``stop_on_error=True`` an error finding (stale or
non-finite gradients) sets ``trainer.should_stop``, Lightning's own graceful stop.
Works with ``lightning.pytorch`` (preferred) or the older ``pytorch_lightning`` package.
"""

from __future__ import annotations

from typing import Any, Sequence

from overt.errors import OvertError
from overt.findings import Finding
from overt.integrations.guarded import FrameworkGuards, finding_text

EXTRA_HINT = ("pip install 'overt[lightning]'   (the lightning extra)"
              "; from a checkout on a CPU-only machine: "
              "pip install -c constraints-cpu.txt -e '.[lightning]' (keeps the CPU torch build)")


def _lightning() -> Any:
    try:
        import lightning.pytorch as pl
    except ImportError:
        try:
            import pytorch_lightning as pl  # type: ignore[no-redef]
        except ImportError:
            raise OvertError("overt.integrations.lightning needs PyTorch Lightning, which is not installed",
                             why="the Lightning integration is an optional extra of overt",
                             fix=EXTRA_HINT) from None
    return pl


_pl = _lightning()


class OvertCallback(_pl.Callback):  # type: ignore[misc,name-defined]
    """The runtime guards in a Lightning ``Trainer``.

    ``strict``: warnings count as errors; ``ignore``: slugs or codes to silence;
    ``check_every`` / ``warmup_steps``: how often the expensive checks (``overhead_budget``: ignored)
    run (see :class:`overt.guards.GuardOptions`); ``stop_on_error``: stop the trainer
    gracefully after an error finding; ``stream``: where findings are printed (stderr)."""

    def __init__(self, *, strict: bool = False, ignore: Sequence[str] = (), check_every: int = 50,
                 warmup_steps: int = 5, overhead_budget: float | None = None, stop_on_error: bool = False,
                 stream: Any = None):
        super().__init__()
        self.guards = FrameworkGuards(strict=strict, ignore=ignore, check_every=check_every,
                                      warmup_steps=warmup_steps, overhead_budget=overhead_budget,
                                      stop_on_error=stop_on_error, stream=stream)
        self._discovering = False

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the latest fit."""
        return self.guards.findings

    # -- Lightning's hooks ------------------------------------------------------------
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.is_global_zero:
            import io

            self.guards.options.stream = io.StringIO()  # other ranks check silently
        schedulers = [getattr(c, "scheduler", None) for c in getattr(trainer, "lr_scheduler_configs", [])]
        self.guards.start(optimizers=list(trainer.optimizers), schedulers=schedulers, names_from=pl_module,
                          step_source=lambda: trainer.global_step, discover=True)
        self._discovering = True

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._discovering:  # the first batch has shown which modules training_step calls
            self._discovering = False
            self.guards.discovering(False)
            session = self.guards.session
            if session is not None and not session.models:  # nothing with parameters ran forward
                from overt.guards.api import watch

                watch(session, pl_module)
        self.guards.step_done(trainer.is_global_zero)
        new = self.guards.new_findings()  # host integers: nothing else happens on a quiet step
        if new:
            self._log(trainer, new)
            if self.guards.should_stop(new):
                trainer.should_stop = True

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(trainer, None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._finish(trainer, exception)

    # -- reporting --------------------------------------------------------------------
    def _finish(self, trainer: Any, error: BaseException | None) -> None:
        session = self.guards.session
        if session is None or session.closed:
            return
        out_dir = _log_dir(trainer) if trainer.is_global_zero else None
        self.guards.finish(out_dir, error=error)  # every rank: their findings are gathered on rank 0
        new = self.guards.new_findings()  # the end-of-run checks' findings
        if new and error is None:
            self._log(trainer, new)

    def _log(self, trainer: Any, new: list[Finding]) -> None:
        """The counts to every logger at the trainer's step; TensorBoard also gets the text."""
        if not trainer.is_global_zero:
            return
        counts = self.guards.counts()
        for logger in getattr(trainer, "loggers", []):
            try:
                logger.log_metrics(counts, step=trainer.global_step)
                experiment = getattr(logger, "experiment", None)
                if hasattr(experiment, "add_text"):
                    experiment.add_text("overt/findings", finding_text(new), trainer.global_step)
            except Exception as exc:  # a logger's failure loses the line, not the run
                if self.guards.session is not None:
                    self.guards.session.check_failed(f"OvertCallback logging to {type(logger).__name__}", exc)


def _log_dir(trainer: Any) -> str | None:
    """``trainer.log_dir`` as Lightning computes it, without its broadcast: ``Trainer.log_dir`` is
    a collective that every process must call, and only rank 0 writes (after an exception the
    other ranks may not even be there)."""
    try:
        loggers = list(getattr(trainer, "loggers", []))
        if loggers:
            first = loggers[0]
            own_dir = isinstance(first, (_pl.loggers.TensorBoardLogger, _pl.loggers.CSVLogger))
            path = first.log_dir if own_dir else first.save_dir
            if path:
                return str(path)
    except Exception:  # a logger that cannot say: the trainer's root, as without loggers
        pass
    return getattr(trainer, "default_root_dir", None)


__all__ = ["OvertCallback"]
