"""One checkpoint on disk: an atomically renamed directory with a SHA-256 manifest.

Layout of ``checkpoints/step-000123/``::

    model.safetensors   the model's weights (a module named "model"; one file per module)
    state.safetensors   every other tensor (optimizer moments, RNG states, ...)
    state.json          everything else: positions, hyper-parameters, config, versions
    manifest.json       size and SHA-256 of each file above; written last

The directory is built under a hidden temporary name, each file flushed and
fsynced, then renamed into place and the parent folder fsynced, so a crash
leaves either the complete checkpoint or none (a stray ``.tmp-*`` folder that
is ignored and cleaned up).  Reading checks the manifest before anything is
decoded, and reads only safetensors and JSON: nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from overt.checkpoint.codec import CheckpointError
from overt.run.atomic import fsync_dir, fsync_file, usual_mode
from overt.run.layout import CHECKPOINT_TEMP_PREFIXES, checkpoint_name, checkpoint_step

FORMAT = "overt-checkpoint"
VERSION = 1
MANIFEST = "manifest.json"
STATE_JSON = "state.json"
STATE_TENSORS = "state.safetensors"
_PICKLE_WHY = ("overt checkpoints are safetensors and JSON only; a pickle can run arbitrary code "
               "when loaded, so overt never unpickles")


@dataclass
class Snapshot:
    """A checkpoint held in host memory, ready to be written (possibly by a background thread)."""

    step: int
    tensor_files: dict[str, dict[str, torch.Tensor]]  # file name -> {key: host tensor}
    state: dict[str, Any]  # goes to state.json
    metric: dict[str, Any] | None = None


@dataclass
class Entry:
    """A checkpoint directory found on disk (not yet verified)."""

    step: int
    path: Path
    metric: float | None = None
    problem: str | None = None  # set when the manifest cannot be read


@dataclass
class Loaded:
    """A verified checkpoint read into memory."""

    path: Path
    step: int
    state: dict[str, Any]
    tensor_files: dict[str, dict[str, torch.Tensor]]
    skipped: list[tuple[Path, str]] = field(default_factory=list)


# -- reading files safely ----------------------------------------------------------------------

_MANIFEST_MAX = 1 << 24  # a manifest is a few hundred bytes; never read more than this


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of ``path``, which must be a regular file (not a FIFO, device, folder or symlink):
    opening a FIFO would block forever and a device such as /dev/zero never ends.  At most
    ``limit + 1`` bytes are read, so a file longer than expected is seen without reading it all."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        kind = "a symbolic link" if Path(path).is_symlink() else (getattr(exc, "strerror", None) or str(exc))
        raise CheckpointError(f"cannot open {path}: {kind}",
                              why="a checkpoint holds only regular files written by overt",
                              fix="use another checkpoint") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode)
                    else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a file")
            raise CheckpointError(f"{path} is {kind}, not a regular file; it was not read",
                                  why="a checkpoint holds only regular files written by overt",
                                  fix="use another checkpoint")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read() if limit is None else fh.read(limit + 1)
    finally:
        os.close(fd)


# -- writing -----------------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tmp_name(root: Path, step: int) -> Path:
    """A fresh hidden temporary folder name for the checkpoint of ``step`` (ignored until renamed)."""
    return root / f".tmp-{checkpoint_name(step)}-{os.getpid()}-{time.monotonic_ns()}"


def write_snapshot(snap: Snapshot, root: Path, tmp: Path | None = None) -> Path:
    """Write ``snap`` as ``root/step-NNNNNN`` atomically and durably; returns the final path.

    ``tmp``: an existing temporary folder (from :func:`tmp_name`) that already holds other files
    of the same checkpoint (a sharded checkpoint's shards); they are committed by the same rename."""
    from safetensors.torch import save_file

    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(snap.step)
    if tmp is None:
        tmp = tmp_name(root, snap.step)
        tmp.mkdir()
    try:
        files: dict[str, dict[str, Any]] = {}
        for name, tensors in snap.tensor_files.items():
            path = tmp / name
            save_file(tensors, str(path), metadata={"format": "pt"})
            usual_mode(path)  # (safetensors creates 0600 files; the other files of the run are 0644)
            fsync_file(path)
            files[name] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
        path = tmp / STATE_JSON
        path.write_text(json.dumps(snap.state, indent=1, allow_nan=False) + "\n")
        fsync_file(path)
        files[STATE_JSON] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
        manifest = {"format": FORMAT, "version": VERSION, "step": snap.step, "metric": snap.metric,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
        path = tmp / MANIFEST
        path.write_text(json.dumps(manifest, indent=1) + "\n")
        fsync_file(path)
        fsync_dir(tmp)
        if final.exists():  # the same step saved again (after resuming from an older checkpoint)
            _remove(final)
        os.rename(tmp, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _remove(path: Path) -> None:
    """Delete a checkpoint so that no half-deleted folder ever carries a checkpoint's name."""
    trash = path.with_name(f".trash-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(path, trash)
    fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def remove_checkpoint(path: Path) -> None:
    _remove(path)


def clean_stale(root: Path) -> list[Path]:
    """Delete leftovers of interrupted saves and deletions (hidden ``.tmp-*``/``.trash-*`` folders)."""
    removed = []
    if root.is_dir():
        for child in root.iterdir():
            if child.name.startswith(CHECKPOINT_TEMP_PREFIXES):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
    return removed


# -- finding -----------------------------------------------------------------------------------

def list_checkpoints(root: Path) -> list[Entry]:
    """Checkpoint folders under ``root``, oldest first, with the metric their manifest records."""
    entries = []
    if not root.is_dir():
        return entries
    for child in root.iterdir():
        step = checkpoint_step(child.name)
        if step is None:
            continue
        entry = Entry(step, child)
        try:
            manifest = json.loads(read_regular(child / MANIFEST, _MANIFEST_MAX))
            metric = manifest.get("metric") or {}
            value = metric.get("value")
            entry.metric = float(value) if isinstance(value, (int, float)) else None
        except (OSError, ValueError, AttributeError, CheckpointError) as exc:
            entry.problem = f"manifest unreadable: {exc}"
        entries.append(entry)
    return sorted(entries, key=lambda e: e.step)


# -- reading -----------------------------------------------------------------------------------

_HEADER_MAX = 100_000_000  # safetensors' own limit on the JSON header's size


def safetensors_header_size(data: bytes) -> int | None:
    """The length of the safetensors JSON header that ``data`` starts with, when its first 8 bytes
    are one (little-endian, at least 2, at most safetensors' limit), else ``None``."""
    if len(data) < 8:
        return None
    n = int.from_bytes(data[:8], "little")
    return n if 2 <= n <= _HEADER_MAX else None


def is_safetensors_header(header: bytes) -> bool:
    """Whether ``header`` (the bytes after the 8-byte length) parses as a safetensors header: a JSON
    object whose entries are tensors (``dtype``, ``shape``, ``data_offsets``) or ``__metadata__``."""
    try:
        parsed = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(parsed, dict):
        return False
    for key, info in parsed.items():
        if key == "__metadata__":
            if not (isinstance(info, dict) and all(isinstance(v, str) for v in info.values())):
                return False
            continue
        if not (isinstance(info, dict) and isinstance(info.get("dtype"), str)
                and isinstance(info.get("shape"), list) and isinstance(info.get("data_offsets"), list)
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in info["shape"])
                and len(info["data_offsets"]) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in info["data_offsets"])):
            return False
    return True


def sniff(data: bytes) -> str | None:
    """``None`` when ``data`` is a safetensors file (its header parses as one), else the name of
    what it is instead (a pickle, a torch.save zip, or just "not a safetensors file").

    The safetensors test comes first and is exact: the header length is 8 little-endian bytes, so
    a valid file whose header is 128, 384, 640... bytes long starts with the bytes ``80 01``..``80 05``
    of a pickle's PROTO opcode; only a file that is *not* safetensors is looked at as a pickle."""
    n = safetensors_header_size(data)
    if n is not None and n <= len(data) - 8 and is_safetensors_header(data[8:8 + n]):
        return None
    if data[:1] == b"\x80" and len(data) > 1 and data[1] <= 5:
        return "a Python pickle"
    if data[:4] == b"PK\x03\x04":
        return "a torch.save/zip archive (which holds a pickle)"
    return "not a safetensors file"


def sniff_file(path: Path) -> str | None:
    """:func:`sniff` for a regular file on disk, reading only its header."""
    head = read_regular(path, 7)[:8]
    n = safetensors_header_size(head)
    if n is not None:
        data = read_regular(path, 8 + n - 1)[:8 + n]
        return sniff(data)
    return sniff(head)


def read_safetensors(path: Path, data: bytes | None = None) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file on the CPU; a pickle in its place is refused, never loaded."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    if data is None:
        try:
            data = read_regular(path)
        except OSError as exc:
            raise CheckpointError(f"cannot read {path}: {exc.strerror}", fix="check the path") from None
    kind = sniff(data)
    if kind is not None:
        raise CheckpointError(
            f"{path} is {kind}, not a safetensors file; it was not loaded",
            why=_PICKLE_WHY if "pickle" in kind else "the file is damaged or is not an overt checkpoint file",
            fix=("if you trust its origin, convert it yourself: "
                 "safetensors.torch.save_file(torch.load(path, weights_only=True), 'model.safetensors')"
                 if "pickle" in kind else "use another checkpoint"),
        )
    try:
        return load(data)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file: {exc}",
                              why="the file is damaged", fix="use another checkpoint") from None


def verify_and_read(path: Path) -> Loaded:
    """Check ``path`` against its manifest and read it; raises :class:`CheckpointError` saying what is wrong."""
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist", fix="check the path")
    if not path.is_dir():
        kind = sniff_file(path)
        raise CheckpointError(
            f"{path} is a file ({kind or 'safetensors'}), not an overt checkpoint folder; it was not loaded",
            why=_PICKLE_WHY if kind and "pickle" in kind else "an overt checkpoint is a folder with a manifest",
            fix="point at a checkpoint folder (RUN_DIR/checkpoints/step-NNNNNN) or its run directory",
        )
    try:
        manifest = json.loads(read_regular(path / MANIFEST, _MANIFEST_MAX))
    except FileNotFoundError:
        raise CheckpointError(f"{path.name} has no {MANIFEST}",
                              why="the manifest is written last: without it the save did not finish",
                              fix="use an older checkpoint") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path.name}: {MANIFEST} is unreadable ({exc})", fix="use an older checkpoint") from None
    if not (isinstance(manifest, dict) and manifest.get("format") == FORMAT
            and isinstance(manifest.get("files"), dict)):
        raise CheckpointError(f"{path.name}: {MANIFEST} is not an overt checkpoint manifest",
                              fix="use an older checkpoint")
    version = manifest.get("version", 0)
    if not _is_count(version):
        raise CheckpointError(f"{path.name}: {MANIFEST} has a malformed version {version!r}",
                              why="a manifest written by overt holds whole numbers there",
                              fix="use an older checkpoint")
    if version > VERSION:
        raise CheckpointError(f"{path.name} was written by a newer overt (format {manifest['version']})",
                              fix="upgrade overt to read it")
    contents: dict[str, bytes] = {}
    for name, info in manifest["files"].items():
        if (not isinstance(name, str) or not isinstance(info, dict) or "/" in name or "\\" in name
                or "\0" in name or name.startswith(".") or not _is_count(info.get("bytes"))
                or info["bytes"] > _FILE_MAX):
            raise CheckpointError(f"{path.name}: the manifest names an invalid file {name!r}",
                                  why="a manifest written by overt names plain files inside its own folder",
                                  fix="use an older checkpoint")
        try:
            data = read_regular(path / name, info["bytes"])
        except FileNotFoundError:
            raise CheckpointError(f"{path.name}: {name} is missing", fix="use an older checkpoint") from None
        if len(data) != info.get("bytes"):
            size = f"{len(data)}" if len(data) <= info["bytes"] else f"more than {info['bytes']}"
            raise CheckpointError(f"{path.name}: {name} has {size} bytes, the manifest says {info['bytes']}",
                                  why="the file was cut short or changed after the save (a crash, a full disk)",
                                  fix="use an older checkpoint")
        if hashlib.sha256(data).hexdigest() != info.get("sha256"):
            raise CheckpointError(f"{path.name}: {name} does not match its SHA-256 in the manifest",
                                  why="the file was corrupted or changed after the save",
                                  fix="use an older checkpoint")
        contents[name] = data
    if STATE_JSON not in contents:
        raise CheckpointError(f"{path.name}: the manifest lists no {STATE_JSON}", fix="use an older checkpoint")
    try:
        state = json.loads(contents.pop(STATE_JSON))
    except ValueError as exc:
        raise CheckpointError(f"{path.name}: {STATE_JSON} is not valid JSON ({exc})") from None
    if not isinstance(state, dict) or not isinstance(state.get("objects"), dict):
        raise CheckpointError(f"{path.name}: {STATE_JSON} is not an overt checkpoint state",
                              fix="use an older checkpoint")
    step = manifest.get("step", state.get("step", 0))
    if not _is_count(step):
        raise CheckpointError(f"{path.name}: {MANIFEST} has a malformed step {step!r}",
                              why="a manifest written by overt holds the optimizer step as a whole number",
                              fix="use an older checkpoint")
    tensor_files = {name: read_safetensors(path / name, data) for name, data in contents.items()}
    for name, tensors in tensor_files.items():
        if name != STATE_TENSORS:  # a module's weights
            check_finite(tensors, f"{path.name}/{name}")
    return Loaded(path=path, step=step, state=state,
                  tensor_files=tensor_files)


_FILE_MAX = 1 << 50  # no checkpoint file is a petabyte: a larger size in a manifest is damage


def _is_count(value: Any) -> bool:
    """A whole number >= 0 as JSON gives it (not a bool, a float or a string)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_finite(tensors: dict[str, torch.Tensor], source: str) -> None:
    """Refuse weights that hold NaN/inf: continuing from them (or predicting with them) is garbage."""
    from overt.checkpoint.finite import all_finite, nonfinite_names

    if all_finite(tensors.values()):
        return
    bad = nonfinite_names(tensors.items())
    raise CheckpointError(
        f"{source} holds NaN/inf weights ({len(bad)} tensor(s): {', '.join(bad[:5])}{', ...' if len(bad) > 5 else ''})",
        why="the run had already diverged when it was saved; training on from it, or predicting with it, "
            "gives garbage",
        fix="use an older checkpoint (overt resume falls back to the newest finite one)",
    )


def read_newest_valid(root: Path, log: Any = None, check: Any = None) -> Loaded:
    """The newest checkpoint under ``root`` that verifies; each bad newer one is named in ``skipped``
    (and passed to ``log``).  Raises when none verifies.  ``check(loaded)``, when given, is a further
    test (raising :class:`CheckpointError`) that a checkpoint must pass to be used, e.g. that the
    shards of a sharded checkpoint match their hashes."""
    entries = list_checkpoints(root)
    skipped: list[tuple[Path, str]] = []
    if log is not None and root.is_dir():
        for child in sorted(root.iterdir()):
            if child.name.startswith(CHECKPOINT_TEMP_PREFIXES[0]):
                log(f"overt: {child} is a save that never finished (the process ended while writing it); "
                    "ignored, and deleted at the next save")
    for entry in reversed(entries):
        try:
            loaded = verify_and_read(entry.path)
            if check is not None:
                check(loaded)
        except CheckpointError as exc:
            reason = exc.what
            skipped.append((entry.path, reason))
            if log is not None:
                log(f"overt: checkpoint {entry.path} is unusable: {reason}; trying the previous one")
            continue
        loaded.skipped = skipped
        if skipped and log is not None:
            log(f"overt: using {loaded.path.name} (skipped {', '.join(p.name for p, _ in skipped)})")
        return loaded
    if not entries:
        raise CheckpointError(f"no checkpoint in {root}",
                              why="there is nothing to resume from",
                              fix="train with checkpoint=true (and a run directory) to write checkpoints")
    details = "; ".join(f"{p.name}: {r}" for p, r in skipped)
    raise CheckpointError(f"no valid checkpoint in {root}", where=details,
                          why="every checkpoint there failed verification",
                          fix="restart the run from scratch")
