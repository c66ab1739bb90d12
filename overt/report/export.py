"""``metrics.csv``: every logged record of every run, one row each, for spreadsheets."""

from __future__ import annotations

import csv
from pathlib import Path

from overt.report.series import run_labels
from overt.run.reader import RunRecord


def write_csv(runs: list[RunRecord], path: Path) -> Path:
    """Columns ``run``, ``step``, ``epoch`` and every metric key of any run (empty where a
    record has none); rows in each run's logged order."""
    keys: dict[str, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(run.metric_names))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["run", "step", "epoch", *keys], restval="", extrasaction="ignore")
        writer.writeheader()
        for run, label in zip(runs, run_labels(runs)):
            for record in run.metrics:
                writer.writerow({"run": label, **record})
    return path
