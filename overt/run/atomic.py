"""Crash-safe file writes: write beside the final name, flush, fsync, rename, fsync the folder."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk."""
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


@contextlib.contextmanager
def atomic_path(final: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; once the block has written it, make it
    durable and rename it into place.  On error the temporary file is removed and
    ``final`` is untouched: a reader sees the old file or the new one, never half."""
    final = Path(final)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, final)
        fsync_dir(final.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text_atomic(final: str | Path, text: str) -> None:
    with atomic_path(final) as tmp:
        tmp.write_text(text)


def is_disk_full(error: BaseException | None) -> bool:
    """Whether ``error`` (or an error it was raised from) says the disk is full or the quota is used
    up: an ``OSError`` with ENOSPC/EDQUOT, or an error that wraps one in its message (safetensors'
    ``SafetensorError``: "No space left on device (os error 28)"; torch.distributed.checkpoint's
    per-rank failures)."""
    import errno

    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
            return True
        text = str(error)  # SafetensorError, torch.distributed.checkpoint's CheckpointException, ...
        if "No space left on device" in text or "Disk quota exceeded" in text:
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False
