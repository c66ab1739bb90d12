"""``metrics.csv``: every logged record of every run, one row each, for spreadsheets."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from overt.report.series import run_labels
from overt.run.atomic import write_text_atomic
from overt.run.reader import RunRecord


def write_csv(runs: list[RunRecord], path: Path) -> Path:
    """Columns ``run``, ``step``, ``epoch`` and every metric key of any run (empty where a
    record has none); rows in each run's logged order."""
    keys: dict[str, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(run.metric_names))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = io.StringIO(newline="")
    writer = csv.DictWriter(fh, fieldnames=["run", "step", "epoch", *keys], restval="", extrasaction="ignore")
    writer.writeheader()
    for run, label in zip(runs, run_labels(runs)):
        for record in run.metrics:
            writer.writerow({"run": label, **record})
    write_text_atomic(path, fh.getvalue())  # never through a link planted at path
    return path
