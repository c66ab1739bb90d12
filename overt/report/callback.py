"""``plots=true``: the report's PNGs drawn into ``RUN_DIR/plots/`` when the run ends."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.run.rundir import RunDir

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class PlotsCallback(Callback):
    """Draws the plots of :mod:`overt.report.plots` from the run directory's ``metrics.jsonl``
    at the end of the run, and of what was logged when the run fails.  Refuses to start
    without matplotlib (naming the extra) rather than training and failing at the end."""

    def __init__(self, run_dir: str | Path | RunDir):
        from overt.report.plots import require_matplotlib

        require_matplotlib()  # before the run starts, not after hours of training
        self.run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.run_dir = self.run.path
        self.written: list[Path] = []

    def _draw(self, summary: dict[str, Any] | None, error: BaseException | None = None) -> None:
        from overt.report.plots import write_plots
        from overt.run.reader import read_run

        run = read_run(self.run_dir)
        run.summary = summary  # this hook's, whether or not summary.json is written yet
        if error is not None:
            run.status = {"status": "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"}
        self.written = write_plots([run], self.run.folder(self.run.plots))  # a linked plots/ is refused

    def on_fit_start(self, trainer: Trainer) -> None:
        self.run.folder(self.run.plots, create=False)  # a linked plots/ is refused before training, not after

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        summary["plots"] = str(self.run.plots)

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._draw(summary)

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        try:
            self._draw(None, error)
        except Exception as exc:  # noqa: BLE001 - never hide the run's own error behind a plotting one
            print(f"overt: could not draw the plots of the failed run: {exc}", file=sys.stderr)
