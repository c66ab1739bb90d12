"""``metrics.csv``: the run's ``metrics.jsonl`` as a spreadsheet-ready table (``metrics_csv=true``, the default).

Columns ``step``, ``epoch``, then every metric in the order it first appeared; one row per
logged point and per epoch's end, empty cells where a record has no value.  Rewritten
atomically from ``metrics.jsonl`` at each epoch's end and when the run ends (failed runs
too), so it never disagrees with it (a resumed run's trimmed records included).  This module
owns the file."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.run.atomic import write_text_atomic
from overt.run.layout import METRICS

if TYPE_CHECKING:
    from overt.engine.loop import Trainer

CSV_NAME = "metrics.csv"


def metrics_table(records: list[dict[str, Any]]) -> str:
    """Records (dicts with ``step``, ``epoch`` and metrics) as CSV text."""
    keys: dict[str, None] = {"step": None, "epoch": None}
    for record in records:
        keys.update(dict.fromkeys(record))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(keys), restval="", extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


def write_metrics_csv(run_dir: str | Path) -> Path:
    """Write ``run_dir/metrics.csv`` from ``run_dir/metrics.jsonl``; returns its path."""
    from overt.run.reader import iter_metric_lines

    run_dir = Path(run_dir)
    source = run_dir / METRICS
    # only a regular file is read (a metrics.jsonl pointing at a device such as /dev/full never ends)
    records = [record for _, record in iter_metric_lines(source)] if source.is_file() else []
    path = run_dir / CSV_NAME
    write_text_atomic(path, metrics_table(records))
    return path


class MetricsCSV(Callback):
    """Keeps ``metrics.csv`` in step with ``metrics.jsonl`` (placed after :class:`MetricsLog`)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.failed = False

    def _write(self) -> None:
        if self.failed:
            return
        try:
            write_metrics_csv(self.run_dir)
        except OSError as exc:  # a full disk loses the table, not the run
            self.failed = True
            print(f"overt: cannot write {self.run_dir / CSV_NAME} ({exc.strerror or exc}); metrics.jsonl has "
                  f"every record", file=sys.stderr, flush=True)

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._write()

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._write()

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        self._write()


__all__ = ["MetricsCSV", "metrics_table", "write_metrics_csv"]
