"""metrics.jsonl (one JSON object per logged point) and TensorBoard event files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overt.engine.callbacks import Callback


class MetricsLog(Callback):
    """Appends every logged point and every epoch's metrics to ``metrics.jsonl``
    (keys: ``step``, ``epoch`` and metric names, see :mod:`overt.engine.metrics`)
    and, when ``tensorboard``, to event files under ``tb/``."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tb_dir = Path(run_dir) / "tb"
        self.tensorboard = tensorboard
        self._fh: Any = None
        self._tb: Any = None

    def on_fit_start(self, trainer: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
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

    def on_log(self, trainer: Any, logs: dict[str, float]) -> None:
        self._write(dict(logs))

    def on_epoch_end(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> None:
        self._write({"step": trainer.state.global_step, "epoch": epoch, **metrics})

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None

    def on_fit_end(self, trainer: Any, summary: dict[str, Any]) -> None:
        self._close()

    def on_exception(self, trainer: Any, error: BaseException) -> None:
        self._close()
