"""Choosing and claiming a run directory."""

from __future__ import annotations

import time
from pathlib import Path

from overt.errors import ConfigError
from overt.run import lock
from overt.run.layout import STATUS, SUMMARY, checkpoint_step, checkpoints_dir


def run_dir_for(run_dir: str | None, runs_root: str, name: str | None, recipe: str) -> Path:
    """``run_dir`` if given, else ``runs_root/name``, else ``runs_root/<recipe>-<timestamp>``."""
    if run_dir:
        return Path(run_dir)
    if not name:
        stem = Path(recipe).stem if recipe.endswith((".py", ".yaml", ".yml")) else recipe.rsplit(".", 1)[-1]
        name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(runs_root) / name


def run_status(path: Path) -> str | None:
    """completed / stopped / failed / running / ..., from the run's own files.  A run that says
    ``running`` while no process holds its lock ended without saying so (killed, or its last
    status write failed): that is reported as ``ended abruptly``."""
    from overt.run.reader import read_json

    for name in (SUMMARY, STATUS):
        data = read_json(path / name)
        if data is None:
            continue
        status = str(data.get("status"))
        if status == "running" and lock.holder(path) is None:
            return "ended abruptly"
        return status
    return None


def _has_checkpoints(path: Path) -> bool:
    root = checkpoints_dir(path)
    return root.is_dir() and any(checkpoint_step(p.name) is not None for p in root.iterdir())


def _contents(path: Path) -> list[Path]:
    return [p for p in path.iterdir() if p.name != lock.LOCK]


def check_claimable(path: Path) -> None:
    """Raise the error :func:`claim` would raise for ``path``, without creating or locking anything
    (so that a bad run directory is reported before any data is loaded)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {path} is an existing file, not a folder",
                          why="a run writes its config, metrics, checkpoints and weights into a folder",
                          fix="choose another run_dir= (or name=), or move the file away")
    if not path.is_dir():
        return
    info = lock.holder(path)
    if info is not None and not lock.is_held_here(path):
        raise ConfigError(
            f"run directory {path} is in use by another overt process ({lock.describe_holder(info)})",
            why="two processes training one run would overwrite each other's checkpoints and metrics",
            fix="wait for that process to end (or stop it), or use another run directory",
        )
    if not _contents(path):
        return
    status = run_status(path)
    if status == "completed":
        fix = "choose another name= or run_dir=, or delete the folder"
    elif _has_checkpoints(path):
        fix = f"to continue that run use `overt resume {path}`; to start over, choose another name= or run_dir="
    else:
        fix = (f"it has no checkpoint to continue from, so start it again: delete the folder (rm -r {path}) "
               "and run the same command, or choose another name= or run_dir=")
    raise ConfigError(
        f"run directory {path} already holds {_describe(status)}",
        why="writing a new run into it would mix two runs' metrics and weights",
        fix=fix,
    )


def _describe(status: str | None) -> str:
    if status == "completed":
        return "a finished run"
    if status == "ended abruptly":
        return "a run that ended abruptly (its process was killed, or could not record how it ended)"
    return f"a {status} run" if status else "a previous run"


def claim(path: Path, *, unique: bool = False) -> Path:
    """Create ``path`` for a new run and lock it for this process; refuse one that already holds a
    run, or that another process holds.  With ``unique`` (a generated name) an existing folder of
    that name is not an error: ``-2``, ``-3``, ... is appended until a new folder is created."""
    path = Path(path)
    if unique:
        path = _new_folder(path)
    check_claimable(path)
    path.mkdir(parents=True, exist_ok=True)
    lock.acquire(path)  # raises, naming the holder, when another process got here first
    try:
        check_claimable(path)  # again, under the lock: another process may have written it meanwhile
    except ConfigError:
        lock.release(path)
        raise
    return path


def _new_folder(path: Path) -> Path:
    """Create a folder at ``path`` or, when it exists, at ``path-2``, ``path-3``...; atomic (mkdir)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = path, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.name}-{n}")
