"""``early_stop=N``: stop when the monitored metric has not improved for N validations.

"Improved" means better than the best value so far by more than ``early_stop_min_delta``
(lower for ``monitor_mode=min``, higher for ``max``).  The check runs at each epoch's end on
metrics already on the host (no device read).  The run then ends as a completed one
(``summary.json``: ``"early_stop": {...}``, with the epoch it stopped at and the best value);
the best checkpoint (``keep_best``) holds the weights of the best epoch.  Composed in
:mod:`overt.compose` when ``early_stop`` is set, before the checkpoints, so that each epoch's
checkpoint holds the count.  The count, the best value and the epoch the run stopped at live in
``trainer.state.callbacks["early_stop"]`` (:class:`~overt.engine.state.TrainState`): a checkpoint
carries them, so a resumed run stops at the same epoch with the same best as an uninterrupted
one, and a run that already stopped early stops again at once (nothing is trained).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.errors import ConfigError

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class EarlyStopping(Callback):
    """Sets ``trainer.should_stop`` after ``patience`` validations without an improvement of
    ``monitor`` by more than ``min_delta``."""

    def __init__(self, patience: int, min_delta: float = 0.0, *, monitor: str = "val/loss", mode: str = "min",
                 verbose: bool = True):
        if patience < 1:
            raise ConfigError(f"early_stop must be >= 1 (validations without improvement), got {patience}",
                              fix="e.g. early_stop=5, or leave it unset to train every epoch")
        if min_delta < 0:
            raise ConfigError(f"early_stop_min_delta must be >= 0, got {min_delta}",
                              fix="e.g. early_stop_min_delta=0.001")
        self.patience, self.min_delta, self.monitor, self.mode = patience, min_delta, monitor, mode
        self.verbose = verbose
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.bad = 0  # validations in a row without an improvement
        self.stopped_epoch: int | None = None

    #: the key of this callback's state in ``trainer.state.callbacks``
    KEY = "early_stop"

    def on_fit_start(self, trainer: Trainer) -> None:
        self.best, self.best_epoch, self.bad, self.stopped_epoch = None, None, 0, None
        saved = trainer.state.callbacks.get(self.KEY)
        if isinstance(saved, dict) and saved.get("monitor") == self.monitor and saved.get("mode") == self.mode:
            self._load(saved)
        elif trainer.state.epoch or trainer.state.global_step:  # resumed from a checkpoint without the count
            self.best = trainer.state.best_metric
        if self.bad >= self.patience and trainer.state.batch_index == 0:
            trainer.should_stop = True  # the run already stopped early: it ends at once, as it ended
            if self.stopped_epoch is None:
                self.stopped_epoch = max(trainer.state.epoch - 1, 0)
        else:
            self.stopped_epoch = None  # (a larger early_stop on resume: the run goes on)
        self._save(trainer)

    def _load(self, saved: dict[str, Any]) -> None:
        def number(value: Any, kind: Any) -> Any:
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        self.best = number(saved.get("best"), (int, float))
        self.best_epoch = number(saved.get("best_epoch"), int)
        self.bad = max(number(saved.get("bad"), int) or 0, 0)
        self.stopped_epoch = number(saved.get("stopped_epoch"), int)

    def _save(self, trainer: Trainer) -> None:
        trainer.state.callbacks[self.KEY] = {"monitor": self.monitor, "mode": self.mode, "best": self.best,
                                             "best_epoch": self.best_epoch, "bad": self.bad,
                                             "stopped_epoch": self.stopped_epoch}

    def improved(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        return value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        value = metrics.get(self.monitor)
        if value is None:  # no validation this epoch (val_every > 1)
            return
        if self.improved(value):
            self.best, self.best_epoch, self.bad = value, epoch, 0
            self._save(trainer)
            return
        self.bad += 1
        if self.bad >= self.patience and not trainer.should_stop:
            trainer.should_stop = True
            self.stopped_epoch = epoch
            if self.verbose and trainer.rank == 0:
                # with a min_delta, the value compared against is the last that improved by more than it,
                # not the run's best (a smaller gain since then is what did not count): said as such
                ref = "best" if self.min_delta == 0 else f"last improvement by more than {self.min_delta:g}:"
                print(f"overt: early stop after epoch {epoch + 1}: {self.monitor} has not improved by more than "
                      f"{self.min_delta:g} for {self.bad} validation(s) ({ref} {self.best:.6g}"
                      + (f" at epoch {self.best_epoch + 1}" if self.best_epoch is not None else "") + ")",
                      file=sys.stderr, flush=True)
        self._save(trainer)

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if self.stopped_epoch is None:
            return
        summary["status"] = "completed"  # an early stop is how this run was meant to end, not a preemption
        summary["early_stop"] = {"epoch": self.stopped_epoch + 1, "monitor": self.monitor, "best": self.best,
                                 "best_epoch": None if self.best_epoch is None else self.best_epoch + 1,
                                 "patience": self.patience, "min_delta": self.min_delta}


__all__ = ["EarlyStopping"]
