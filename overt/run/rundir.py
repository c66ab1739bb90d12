"""Choosing and claiming a run directory."""

from __future__ import annotations

import time
from pathlib import Path

from overt.errors import ConfigError

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
STATUS = "status.json"
GUARDS = "guards.json"


def run_dir_for(run_dir: str | None, runs_root: str, name: str | None, recipe: str) -> Path:
    """``run_dir`` if given, else ``runs_root/name``, else ``runs_root/<recipe>-<timestamp>``."""
    if run_dir:
        return Path(run_dir)
    if not name:
        stem = Path(recipe).stem if recipe.endswith((".py", ".yaml", ".yml")) else recipe.rsplit(".", 1)[-1]
        name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(runs_root) / name


def _status(path: Path) -> str | None:
    """completed / stopped / preempted / failed / running, from the run's own files."""
    from overt.run.reader import read_json

    for name in (SUMMARY, STATUS):
        data = read_json(path / name)
        if data is not None:
            return str(data.get("status"))
    return None


def claim(path: Path) -> Path:
    """Create ``path`` for a new run; refuse one that already holds a run."""
    if path.exists() and any(path.iterdir()):
        status = _status(path)
        finished = status == "completed"
        raise ConfigError(
            f"run directory {path} already holds a {'finished' if finished else (status or 'previous')} run",
            why="writing a new run into it would mix two runs' metrics and weights",
            fix=("choose another name= or run_dir=, or delete the folder"
                 + ("" if finished else "; to continue that run use `overt resume " + str(path) + "`")),
        )
    path.mkdir(parents=True, exist_ok=True)
    return path
