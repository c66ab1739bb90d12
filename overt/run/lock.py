"""One process per run directory: an OS-level lock that dies with its process.

``RUN_DIR/.lock`` is locked with ``flock`` (exclusive, non-blocking) and holds the
holder's pid, host and start time as JSON.  The kernel releases the lock when the
process ends, however it ends (SIGKILL included), so a stale lock cannot exist; the
file itself may stay behind and means nothing unless it is locked.

One object owns each hold: :class:`RunLock` (used through :meth:`overt.run.rundir.RunDir.lock`)
takes the lock and the same object gives it back; a second hold of a run directory in one
process is refused, as another process's is.
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

# resolved run directories whose lock a RunLock of this process holds now (each has one owner)
_held: set[str] = set()


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


class RunLock:
    """The lock of one run directory, held by this object alone: :meth:`acquire` takes it (or raises
    :class:`ConfigError` naming its holder), :meth:`release` gives it back; also a context manager."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None
        self._key = ""

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def acquire(self) -> None:
        import fcntl

        run_dir = self.run_dir
        if self._fd is not None or _key(run_dir) in _held:
            raise ConfigError(f"run directory {run_dir} is already locked by this process",
                              why="one run directory is written by one owner at a time",
                              fix="use the RunDir that holds it (its lock is not re-entrant)")
        path = run_dir / LOCK
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
        self._fd, self._key = fd, _key(run_dir)
        _held.add(self._key)

    def release(self) -> None:
        """Give the lock back (nothing when this object does not hold it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            _held.discard(self._key)
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_held_here(run_dir: Path) -> bool:
    return _key(run_dir) in _held
