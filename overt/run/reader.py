"""Reading a run directory back: whatever is there, for finished, failed, stopped and
running (or killed) runs alike.

The files are the ones :mod:`overt.run.writer`, :mod:`overt.run.metrics_log` and the
guards write (names in :mod:`overt.run.rundir`).  A run killed mid-write can leave a
last ``metrics.jsonl`` line cut short: it is skipped, never an error."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from overt.errors import OvertError
from overt.run.rundir import CONFIG, GUARDS, METRICS, STATUS, SUMMARY


#: how metrics.jsonl spells non-finite values (strict JSON has no NaN; see overt.run.metrics_log.json_safe)
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def iter_metric_lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(line, record)`` for each complete record of a ``metrics.jsonl`` file."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if isinstance(record, dict):
            yield line, {k: _NON_FINITE.get(v, v) if isinstance(v, str) else v for k, v in record.items()}


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file, in order (each has ``step`` and ``epoch``)."""
    return [record for _, record in iter_metric_lines(path)]


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing or unreadable (e.g. being replaced)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_config(path: Path) -> dict[str, Any]:
    """``config.yaml`` as a dict (empty when missing)."""
    from overt.config import load_yaml

    try:
        data = load_yaml(Path(path).read_text())
    except OSError:
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
class RunRecord:
    """One run directory as read from disk."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    summary: dict[str, Any] | None
    status: dict[str, Any]
    findings: list[dict[str, Any]] | None = None  # None: not recorded (the guards write them when a run ends)
    holder: dict[str, Any] | None = None  # who holds the run's lock (pid, host, since), set by ``state``

    @property
    def name(self) -> str:
        return self.path.resolve().name

    @property
    def state(self) -> str:
        """``completed``, ``stopped``, ``failed``, ``interrupted``, ``running`` (a process holds the
        run's lock now), or ``ended abruptly`` (it says running but nobody holds the lock: killed,
        or its last status write failed); as :func:`overt.run.rundir.run_status` says."""
        status = str((self.summary or {}).get("status") or self.status.get("status") or "running")
        if status == "running" and self.summary is None:
            from overt.run import lock

            self.holder = lock.holder(self.path)
            return "running" if self.holder is not None else "ended abruptly"
        return status

    @property
    def metric_names(self) -> list[str]:
        """Every metric key logged, in order of first appearance."""
        seen: dict[str, None] = {}
        for record in self.metrics:
            for key in record:
                if key not in ("step", "epoch"):
                    seen.setdefault(key, None)
        return list(seen)

    @property
    def epoch_records(self) -> list[dict[str, Any]]:
        """The end-of-epoch records (the ones without the per-log-point ``train/loss``)."""
        return [r for r in self.metrics if "train/loss" not in r and "train/lr" not in r]

    def final_metrics(self) -> dict[str, float]:
        """``summary.final`` when finished; otherwise the latest epoch record's metrics."""
        if self.summary and self.summary.get("final"):
            return dict(self.summary["final"])
        epochs = self.epoch_records
        return {k: v for k, v in epochs[-1].items() if k not in ("step", "epoch")} if epochs else {}

    def best(self) -> dict[str, Any] | None:
        """``{"metric", "mode", "value", "step"}``: from the summary when finished, else computed
        from the logged epochs with the run's ``monitor`` and ``monitor_mode``."""
        best = (self.summary or {}).get("best") or {}
        if best.get("value") is not None:
            return dict(best)
        metric = str(self.config.get("monitor", "val/loss"))
        mode = str(self.config.get("monitor_mode", "min"))
        points = [(r["step"], r[metric]) for r in self.metrics
                  if isinstance(r.get(metric), (int, float)) and math.isfinite(r[metric])]
        if not points:
            return None
        step, value = (min if mode == "min" else max)(points, key=lambda p: p[1])
        return {"metric": metric, "mode": mode, "value": value, "step": step}

    def progress(self) -> tuple[int, int]:
        """``(epochs completed, optimizer steps)`` as far as the files say."""
        if self.summary:
            return int(self.summary.get("epochs", 0)), int(self.summary.get("steps", 0))
        epochs = self.epoch_records
        steps = max((int(r.get("step", 0)) for r in self.metrics), default=int(self.status.get("step", 0)))
        return (int(epochs[-1]["epoch"]) + 1 if epochs else 0), steps


def is_run_dir(path: Path) -> bool:
    return any((Path(path) / name).is_file() for name in (CONFIG, METRICS, SUMMARY, STATUS))


def read_run(path: str | Path) -> RunRecord:
    """Read the run directory ``path``; an :class:`~overt.errors.OvertError` if it is none."""
    path = Path(path)
    if not path.is_dir() or not is_run_dir(path):
        raise OvertError(
            f"{path} is not a run directory" if path.is_dir() else f"{path} does not exist",
            why="a run directory holds config.yaml, metrics.jsonl, status.json (and summary.json when finished)",
            fix="name the folder `overt train` wrote, e.g. runs/digits-20260101-120000",
        )
    summary = read_json(path / SUMMARY)
    findings = (summary or {}).get("findings")
    if findings is None:
        findings = (read_json(path / GUARDS) or {}).get("findings")
    return RunRecord(path=path, config=read_config(path / CONFIG), metrics=read_metrics(path / METRICS),
                     summary=summary, status=read_json(path / STATUS) or {},
                     findings=None if findings is None else list(findings))
