"""``early_stop=N``: stop when the monitored metric has not improved for N validations.

"Improved" means better than the best value so far by more than ``early_stop_min_delta``
(lower for ``monitor_mode=min``, higher for ``max``).  The check runs at each epoch's end on
metrics already on the host (no device read).  The run then ends as a completed one
(``summary.json``: ``"early_stop": {...}``, with the epoch it stopped at and the best value);
the best checkpoint (``keep_best``) holds the weights of the best epoch.  Composed in
:mod:`overt.compose` when ``early_stop`` is set.  After ``overt resume`` the count of epochs
without improvement starts again from zero (the best value is the run's own).
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

    def on_fit_start(self, trainer: Trainer) -> None:
        self.best = trainer.state.best_metric  # a resumed run's best so far
        self.bad, self.stopped_epoch = 0, None

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
            return
        self.bad += 1
        if self.bad >= self.patience and not trainer.should_stop:
            trainer.should_stop = True
            self.stopped_epoch = epoch
            if self.verbose and trainer.rank == 0:
                print(f"overt: early stop after epoch {epoch + 1}: {self.monitor} has not improved by more than "
                      f"{self.min_delta:g} for {self.bad} validation(s) (best {self.best:.6g}"
                      + (f" at epoch {self.best_epoch + 1}" if self.best_epoch is not None else "") + ")",
                      file=sys.stderr, flush=True)

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if self.stopped_epoch is None:
            return
        summary["status"] = "completed"  # an early stop is how this run was meant to end, not a preemption
        summary["early_stop"] = {"epoch": self.stopped_epoch + 1, "monitor": self.monitor, "best": self.best,
                                 "best_epoch": None if self.best_epoch is None else self.best_epoch + 1,
                                 "patience": self.patience, "min_delta": self.min_delta}


__all__ = ["EarlyStopping"]
