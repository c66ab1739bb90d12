"""metrics.jsonl (one JSON object per logged point) and TensorBoard event files.

This module owns the format of ``metrics.jsonl``: it writes it, and trims it when a run
continues from a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.run.atomic import write_text_atomic
from overt.run.rundir import METRICS

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class MetricsLog(Callback):
    """Appends every logged point and every epoch's metrics to ``metrics.jsonl``
    (keys: ``step``, ``epoch`` and metric names, see :mod:`overt.engine.metrics`)
    and, when ``tensorboard``, to event files under ``tb/``.  A run that starts at step N
    (resumed from a checkpoint) first drops the records after step N: the crashed run wrote
    them, the resumed one writes them again."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / METRICS
        self.tb_dir = Path(run_dir) / "tb"
        self.tensorboard = tensorboard
        self._fh: Any = None
        self._tb: Any = None

    def on_fit_start(self, trainer: Trainer) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file():
            trim_after(self.path, trainer.state.global_step)
        self._fh = open(self.path, "a", buffering=1)
        if self.tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # heavy import: only when a run writes events

            self._tb = SummaryWriter(str(self.tb_dir))

    def _write(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for key, value in record.items():
                if key not in ("step", "epoch") and isinstance(value, (int, float)):
                    self._tb.add_scalar(key, value, record["step"])

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._write(dict(logs))

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._write({"step": trainer.state.global_step, "epoch": epoch, **metrics})

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._close()

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        self._close()


def trim_after(path: Path, step: int) -> None:
    """Drop the records of ``path`` (a metrics.jsonl) logged after ``step``, and lines cut short."""
    from overt.run.reader import iter_metric_lines

    kept = []
    for line, record in iter_metric_lines(path):  # a line cut short by the crash is dropped
        at = record.get("step")
        if not isinstance(at, (int, float)) or at <= step:
            kept.append(line)
    write_text_atomic(path, "".join(line + "\n" for line in kept))
