"""One process per run directory: an OS-level lock that dies with its process.

``RUN_DIR/.lock`` is locked with ``flock`` (exclusive, non-blocking) and holds the
holder's pid, host and start time as JSON.  The kernel releases the lock when the
process ends, however it ends (SIGKILL included), so a stale lock cannot exist; the
file itself may stay behind and means nothing unless it is locked.

Within one process the lock is re-entrant: ``overt train`` takes it before building
the run and the :class:`~overt.run.writer.RunWriter` takes it again for ``fit``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from overt.errors import ConfigError

LOCK = ".lock"

# resolved run directory -> (open file descriptor, how many holders in this process)
_held: dict[str, list[int]] = {}


def _key(run_dir: Path) -> str:
    return str(Path(run_dir).resolve())


def holder(run_dir: Path) -> dict[str, Any] | None:
    """Who holds ``run_dir``'s lock (``pid``, ``host``, ``since``), or ``None`` when nobody does."""
    path = Path(run_dir) / LOCK
    if _key(run_dir) in _held:
        return _describe()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _describe() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _read_info(fd: int) -> dict[str, Any]:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        info = {}
    return info if isinstance(info, dict) else {}


def describe_holder(info: dict[str, Any]) -> str:
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, "
            f"running since {info.get('since', '?')}")


def acquire(run_dir: Path) -> None:
    """Take ``run_dir``'s lock for this process, or raise :class:`ConfigError` naming its holder."""
    import fcntl

    key = _key(run_dir)
    if key in _held:
        _held[key][1] += 1
        return
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot open the lock file {path}: {exc.strerror}",
                          why="overt locks a run directory so that two processes never write one run",
                          fix="check that the run directory is writable and that .lock is a plain file") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        info = _read_info(fd)
        os.close(fd)
        raise ConfigError(
            f"run directory {run_dir} is in use by another overt process ({describe_holder(info)})",
            why="two processes training one run would overwrite each other's checkpoints and metrics",
            fix="wait for that process to end (or stop it), or use another run directory",
        ) from None
    try:
        data = json.dumps(_describe()).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:  # a full disk must not prevent the lock itself: the holder is then shown as unknown
        pass
    _held[key] = [fd, 1]


def release(run_dir: Path) -> None:
    """Give up one hold of ``run_dir``'s lock; the last one unlocks it."""
    key = _key(run_dir)
    entry = _held.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _held[key]
        os.close(entry[0])  # closing the descriptor releases the flock


def is_held_here(run_dir: Path) -> bool:
    return _key(run_dir) in _held
