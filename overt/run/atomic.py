"""Crash-safe file writes that never follow a link: write beside the final name, flush, fsync,
rename, fsync the folder.

A run directory can come from anywhere, so a name in it may be a planted symbolic link.  Every
write here goes through a descriptor of the final file's folder: the temporary file is created
exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``) under a random name nobody can guess, written
through its descriptor, and renamed over the final name, which replaces a link instead of
following it.  :func:`open_append` opens a log without following a link either.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Iterator

#: flags of the folder written in (which may be a link the user made, such as a run directory on
#: another disk; :class:`overt.run.rundir.RunDir` refuses links below a run directory itself)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: flags of a file created exclusively: a name that exists (a planted link included) is an error
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


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


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` can only be read by setting it,
    which would race with a background checkpoint thread creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (no /proc: read it by setting it back at once)
    os.umask(mask)
    return mask


def usual_mode(path: Path) -> None:
    """Give ``path`` the mode of the run's other files (0644 less the umask).
    Writers such as safetensors' ``save_file`` create 0600 files; nothing in a run directory is
    secret beyond what the folder's own permissions say, so weights are as readable as the rest."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o644 & ~_umask())


def fsync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk (``path`` itself, never a link's target)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name(final: str) -> str:
    """A hidden temporary name beside ``final``: random, so that no link can be planted for it; it
    ends with ``final``'s suffix, which some writers read (``torch.export.save``: ``.pt2``)."""
    return f".{final}.tmp-{secrets.token_hex(8)}{Path(final).suffix}"


@contextlib.contextmanager
def _folder_fd(folder: Path) -> Iterator[int]:
    fd = os.open(folder, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _replacing(final: Path) -> Iterator[tuple[int, str, int]]:
    """(folder descriptor, temporary name, its open descriptor): a new file beside ``final``, created
    exclusively under a random name; renamed over ``final`` (replacing a link there, never following
    it) when the block ends without error, else removed."""
    with _folder_fd(final.parent) as folder:
        name = temp_name(final.name)
        fd = os.open(name, _NEW_FLAGS, 0o644, dir_fd=folder)
        try:
            try:
                yield folder, name, fd
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(name, final.name, src_dir_fd=folder, dst_dir_fd=folder)
            os.fsync(folder)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folder)


@contextlib.contextmanager
def atomic_path(final: str | Path) -> Iterator[Path]:
    """Yield a new, empty temporary file beside ``final`` (created exclusively, under a random
    name) for a writer that needs a path; once the block has written it, make it durable and
    rename it over ``final`` (a link at ``final`` is replaced, never followed).  On error the
    temporary file is removed and ``final`` is untouched: a reader sees the old file or the new
    one, never half."""
    final = Path(final)
    with _replacing(final) as (_, name, _fd):
        tmp = final.with_name(name)
        yield tmp  # the writer reopens it by name: the same inode the descriptor syncs
        usual_mode(tmp)  # a writer that recreates the file (safetensors: 0600) gets the usual mode back


def write_bytes_atomic(final: str | Path, data: bytes) -> None:
    """Write ``data`` to ``final`` atomically, through the temporary file's own descriptor."""
    with _replacing(Path(final)) as (_, _name, fd):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]


def write_text_atomic(final: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``final`` atomically; see :func:`write_bytes_atomic`."""
    write_bytes_atomic(final, text.encode("utf-8"))


def open_append(path: str | Path) -> int:
    """A descriptor appending to ``path`` (created when missing), which must not be a link:
    ``OSError`` (ELOOP) otherwise."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)


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
