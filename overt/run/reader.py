"""Reading a run directory back: whatever is there, for finished, failed, stopped and
running (or killed) runs alike.

The files are the ones :mod:`overt.run.writer`, :mod:`overt.run.metrics_log` and the
guards write (names in :mod:`overt.run.layout`).  A run killed mid-write can leave a
last ``metrics.jsonl`` line cut short: it is skipped, never an error."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from overt.errors import OvertError
from overt.run.layout import CONFIG, GUARDS, METRICS, NON_FINITE, STATUS, SUMMARY

_TEXT_MAX = 1 << 30  # a run file larger than this is not one overt wrote


class UnreadableFile(Exception):
    """A run file that exists but cannot be read as text (not a regular file, too large, no permission)."""


def read_regular_text(path: Path) -> str | None:
    """The text of ``path`` (None when missing).  Only a regular file is read: a FIFO would block
    forever and a device never ends.  Bytes that are not UTF-8 are replaced, never an error."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableFile(f"{path.name} cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode)
                    else "not a regular file")
            raise UnreadableFile(f"{path.name} is {kind}; it was not read")
        if info.st_size > _TEXT_MAX:
            raise UnreadableFile(f"{path.name} is {info.st_size} bytes, more than a run file can be; it was not read")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(_TEXT_MAX + 1)
    except OSError as exc:
        raise UnreadableFile(f"{path.name} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _number(value: Any) -> float | int | None:
    """A metric value as a number (``"nan"``/``"inf"`` spelled as metrics.jsonl does), else None."""
    if isinstance(value, str):
        return NON_FINITE.get(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _count(value: Any) -> int | None:
    """A step or epoch count: a whole, finite, non-negative number, else None."""
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 0 or number != int(number) or number > 2 ** 62:
        return None
    return int(number)


def _record(raw: dict[str, Any]) -> dict[str, Any] | None:
    """A metrics record with a whole ``step`` and ``epoch`` and only numeric metrics; None when its
    step or epoch is not a count (the line was not written by overt, or was damaged)."""
    step, epoch = _count(raw.get("step")), _count(raw.get("epoch", 0))
    if step is None or epoch is None:
        return None
    out: dict[str, Any] = {"step": step, "epoch": epoch}
    for key, value in raw.items():
        if key not in ("step", "epoch") and isinstance(key, str):
            number = _number(value)
            if number is not None:
                out[key] = number
    return out


def iter_metric_lines(path: Path, problems: list[str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(line, record)`` for each complete record of a ``metrics.jsonl`` file (lines that are not
    a record -- cut short by a crash, damaged, binary -- are skipped and counted in ``problems``)."""
    try:
        text = read_regular_text(Path(path))
    except UnreadableFile as exc:
        if problems is not None:
            problems.append(str(exc))
        return
    if text is None:
        return
    skipped = 0
    lines = text.splitlines()
    for index, line in enumerate(lines):
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError):
            skipped += index < len(lines) - 1 and bool(line.strip())  # the last line: cut short by a crash
            continue
        record = _record(raw) if isinstance(raw, dict) else None
        if record is None:
            skipped += 1
            continue
        yield line, record
    if skipped and problems is not None:
        problems.append(f"{Path(path).name}: {skipped} line(s) are not metric records (damaged or not written by "
                        "overt); skipped")


def read_metrics(path: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file, in order (each has ``step`` and ``epoch``)."""
    return [record for _, record in iter_metric_lines(path, problems)]


def read_json(path: Path, problems: list[str] | None = None) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing or unreadable (e.g. being replaced)."""
    try:
        text = read_regular_text(Path(path))
        data = json.loads(text) if text is not None else None
    except (UnreadableFile, ValueError, RecursionError) as exc:
        if problems is not None:
            problems.append(f"{Path(path).name} is unreadable ({exc}); ignored")
        return None
    if data is not None and not isinstance(data, dict) and problems is not None:
        problems.append(f"{Path(path).name} holds a JSON {type(data).__name__}, not an object; ignored")
    return data if isinstance(data, dict) else None


def read_config(path: Path, problems: list[str] | None = None) -> dict[str, Any]:
    """``config.yaml`` as a dict (empty when missing; when unreadable, empty with the reason added to
    ``problems``, or the exception raised when no ``problems`` list is given).  YAML aliases are refused: overt
    never writes them, and a few nested ones (an "alias bomb") expand to gigabytes."""
    from overt.config import load_yaml

    try:
        text = read_regular_text(Path(path))
        data = load_yaml(text, aliases=False) if text is not None else {}
    except Exception as exc:  # unreadable, an alias, yaml.YAMLError and its subclasses
        if problems is None:  # the caller reports it
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"{Path(path).name} is not readable YAML ({first}); ignored")
        return {}
    if not isinstance(data, dict):
        if problems is not None and data:
            problems.append(f"{Path(path).name} is not a mapping; ignored")
        return {}
    return data


def _clean_summary(summary: dict[str, Any] | None, problems: list[str]) -> dict[str, Any] | None:
    """``summary.json`` with every field of the wrong type dropped (and named in ``problems``)."""
    if summary is None:
        return None
    out = dict(summary)
    dropped = []
    if "status" in out and not isinstance(out["status"], str):
        dropped.append("status")
        out.pop("status")
    for key in ("epochs", "steps"):
        if key in out and _count(out[key]) is None:
            dropped.append(key)
            out.pop(key)
        elif key in out:
            out[key] = _count(out[key])
    if "final" in out:
        final = out["final"]
        out["final"] = ({k: _number(v) for k, v in final.items() if isinstance(k, str) and _number(v) is not None}
                        if isinstance(final, dict) else {})
        if not isinstance(final, dict):
            dropped.append("final")
    if "best" in out:
        best = out["best"]
        value = _number(best.get("value")) if isinstance(best, dict) else None
        if (isinstance(best, dict) and value is not None and isinstance(best.get("metric"), str)
                and _count(best.get("step")) is not None):
            out["best"] = {**best, "value": value, "step": _count(best.get("step")),
                           "mode": str(best.get("mode", "min"))}
        else:
            if best is not None and not (isinstance(best, dict) and best.get("value") is None):
                dropped.append("best")
            out.pop("best")
    if "findings" in out and not (isinstance(out["findings"], list)
                                  and all(isinstance(f, dict) for f in out["findings"])):
        dropped.append("findings")
        out.pop("findings")
    if dropped:
        problems.append(f"summary.json: {', '.join(dropped)} of the wrong type; ignored")
    return out


def _clean_status(status: dict[str, Any] | None, problems: list[str]) -> dict[str, Any]:
    out = dict(status or {})
    dropped = []
    if "status" in out and not isinstance(out["status"], str):
        dropped.append("status")
        out.pop("status")
    if "step" in out:
        if _count(out["step"]) is None:
            dropped.append("step")
            out.pop("step")
        else:
            out["step"] = _count(out["step"])
    if dropped:
        problems.append(f"status.json: {', '.join(dropped)} of the wrong type; ignored")
    return out


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
    problems: list[str] = field(default_factory=list)  # damaged or unreadable files, what was ignored

    @property
    def name(self) -> str:
        return self.path.resolve().name

    @property
    def state(self) -> str:
        """``completed``, ``stopped``, ``failed``, ``interrupted``, ``running`` (a process holds the
        run's lock now), or ``ended abruptly`` (it says running but nobody holds the lock: killed,
        or its last status write failed); as :func:`overt.run.rundir.run_status` says."""
        from overt.run import lock

        self.holder = lock.holder(self.path)
        status = str((self.summary or {}).get("status") or self.status.get("status") or "running")
        if self.holder is not None and (status == "running" or not lock.is_held_here(self.path)):
            return "running"  # another process has the run now (a resume extends a finished run, too)
        if status == "running" and self.summary is None:
            return "ended abruptly"
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
        """The end-of-epoch records (the ones without the per-log-point ``train/loss``), their ``epoch``
        counted from 1 (the epoch that ended, as the console prints it).  Runs written before epochs
        were counted from 1 have an epoch record ``0``: theirs are shifted to the same count."""
        records = [r for r in self.metrics if "train/loss" not in r and "train/lr" not in r]
        if any(r.get("epoch") == 0 for r in records):
            records = [{**r, "epoch": int(r.get("epoch", 0)) + 1} for r in records]
        return records

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
        return (int(epochs[-1]["epoch"]) if epochs else 0), steps  # epoch records count from 1


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
    problems: list[str] = []
    summary = _clean_summary(read_json(path / SUMMARY, problems), problems)
    findings = (summary or {}).get("findings")
    if findings is None:
        guards = (read_json(path / GUARDS, problems) or {}).get("findings")
        if guards is not None and not (isinstance(guards, list) and all(isinstance(f, dict) for f in guards)):
            problems.append("guards.json: findings of the wrong type; ignored")
            guards = None
        findings = guards
    return RunRecord(path=path, config=read_config(path / CONFIG, problems),
                     metrics=read_metrics(path / METRICS, problems),
                     summary=summary, status=_clean_status(read_json(path / STATUS, problems), problems),
                     findings=None if findings is None else list(findings), problems=problems)
