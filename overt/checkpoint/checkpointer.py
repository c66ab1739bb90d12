"""Save and restore any objects with ``state_dict``/``load_state_dict``, plus every RNG.

Works inside a hand-written loop as well as under the :class:`~overt.engine.loop.Trainer`::

    ckpt = overt.Checkpointer("runs/mine/checkpoints", keep_last=3, keep_best=1, mode="min")
    ...
    ckpt.save(step, {"model": model, "optimizer": opt, "progress": {"epoch": epoch, "batch": i}},
              metric=val_loss)
    ...
    restored = ckpt.restore({"model": model, "optimizer": opt})   # newest valid checkpoint
    epoch = restored.objects["progress"]["epoch"]
"""

from __future__ import annotations

import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Literal

import torch
from torch import nn

from overt.checkpoint.codec import CheckpointError, decode, encode
from overt.checkpoint.policy import to_keep
from overt.checkpoint.rng import capture_rng, restore_rng
from overt.checkpoint.store import (STATE_TENSORS, Loaded, Snapshot, clean_stale, list_checkpoints,
                                    read_newest_valid, remove_checkpoint, verify_and_read, write_snapshot)
from overt.checkpoint.weights import LoadReport, load_module_state
from overt.run.atomic import is_disk_full
from overt.run.layout import checkpoint_name


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def versions() -> dict[str, str]:
    from overt import __version__

    import numpy

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "overt": __version__}


class Restored:
    """What :meth:`Checkpointer.restore`/:meth:`Checkpointer.load` read: ``step``, ``path``, ``meta``,
    the decoded ``objects`` (name -> state), ``rng`` and the bad newer checkpoints ``skipped``."""

    def __init__(self, loaded: Loaded):
        try:
            self._read(loaded)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise CheckpointError(f"{loaded.path.name}: state.json is malformed ({type(exc).__name__}: {exc})",
                                  why="its files verify, but their content is not what overt writes",
                                  fix="use an older checkpoint") from None

    def _read(self, loaded: Loaded) -> None:
        state = loaded.state
        self.path: Path = loaded.path
        self.step: int = loaded.step
        self.skipped: list[tuple[Path, str]] = loaded.skipped
        self.meta: dict[str, Any] = state.get("meta", {})
        self.versions: dict[str, str] = state.get("versions", {})
        self.reports: dict[str, LoadReport] = {}
        tensors = loaded.tensor_files.get(STATE_TENSORS, {})
        self.objects: dict[str, Any] = {}
        for name, spec in state.get("objects", {}).items():
            if isinstance(spec, dict) and "__module_file__" in spec:
                module_state = dict(loaded.tensor_files.get(spec["__module_file__"], {}))
                module_state.update(decode(spec.get("extra", {}), tensors))
                self.objects[name] = module_state
            else:
                self.objects[name] = decode(spec, tensors)
        self.rng: dict[str, Any] | None = decode(state["rng"], tensors) if state.get("rng") is not None else None

    def apply(self, objects: dict[str, Any], *, rng: bool = True, strict: bool = True) -> list[str]:
        """Load the saved states into ``objects`` (and the RNGs); returns notes worth showing."""
        missing = [name for name in objects if name not in self.objects]
        if missing:
            raise CheckpointError(f"checkpoint {self.path} holds no state for {', '.join(missing)}",
                                  where=f"it holds: {', '.join(self.objects) or 'nothing'}",
                                  fix="restore only objects that were saved, under the same names")
        for name, obj in objects.items():
            state = self.objects[name]
            if isinstance(obj, nn.Module):
                self.reports[name] = load_module_state(obj, state, strict=strict, source=f"{self.path}/{name}")
            elif hasattr(obj, "load_state_dict"):
                try:
                    obj.load_state_dict(state)
                except (KeyError, ValueError, RuntimeError, TypeError) as exc:
                    raise CheckpointError(f"cannot load the saved {name!r} state into {type(obj).__name__}: {exc}",
                                          where=str(self.path),
                                          why="the object differs from the one that was saved",
                                          fix="build it the same way as in the saved run") from None
            elif isinstance(obj, dict):
                obj.clear()
                obj.update(state)
            else:
                raise CheckpointError(f"cannot restore {name!r}: a {type(obj).__name__} has no load_state_dict",
                                      fix="pass objects with state_dict()/load_state_dict(), or read "
                                          f"restored.objects[{name!r}] yourself")
        notes: list[str] = []
        if rng and self.rng is not None:
            notes += restore_rng(self.rng)
        return notes


class Checkpointer:
    """Atomic, verified checkpoints in ``directory`` with a retention policy.

    ``keep_last``: newest K kept (``None`` keeps all).  ``keep_best``: the K with
    the best ``metric`` (``mode`` ``"min"`` or ``"max"``) are kept too.
    ``background=True`` writes to disk in a thread; :meth:`save` blocks only
    while the state is copied to host memory.  ``log`` receives messages about
    skipped (bad) checkpoints; by default they go to stderr.
    """

    def __init__(self, directory: str | Path, *, keep_last: int | None = 3, keep_best: int = 0,
                 mode: Literal["min", "max"] = "min", metric_name: str | None = None, background: bool = False,
                 log: Callable[[str], None] | None = None):
        if keep_last is not None and keep_last < 1:
            raise CheckpointError(f"keep_last={keep_last} would delete every checkpoint",
                                  fix="use keep_last >= 1, or None to keep all")
        self.directory = Path(directory)
        self.keep_last, self.keep_best, self.mode = keep_last, keep_best, mode
        self.metric_name = metric_name
        self.background = background
        self.log = log or _stderr
        self.last_saved: Path | None = None
        self.blocking_s = 0.0  # total time save() blocked the caller
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._cleaned = False

    # -- saving --------------------------------------------------------------------------------

    def snapshot(self, step: int, objects: dict[str, Any], *, metric: float | None = None,
                 meta: dict[str, Any] | None = None, rng: bool = True) -> Snapshot:
        """Copy the state of ``objects`` (and the RNGs) to host memory."""
        tensor_files: dict[str, dict[str, torch.Tensor]] = {}
        other: dict[str, torch.Tensor] = {}
        specs: dict[str, Any] = {}
        for name, obj in objects.items():
            module = obj.module if isinstance(obj, nn.parallel.DistributedDataParallel) else obj
            if isinstance(module, nn.Module):
                weights: dict[str, torch.Tensor] = {}
                extra: dict[str, Any] = {}
                for key, value in module.state_dict().items():
                    if isinstance(value, torch.Tensor):
                        weights[key] = value.detach().to("cpu", copy=True).contiguous()
                    else:
                        extra[key] = value
                file = f"{name}.safetensors"
                tensor_files[file] = weights
                specs[name] = {"__module_file__": file, "extra": encode(extra, f"{name}.extra", other)}
            else:
                state = obj.state_dict() if hasattr(obj, "state_dict") else obj
                specs[name] = encode(state, name, other)
        state = {
            "step": step,
            "meta": encode(meta or {}, "meta", other),
            "objects": specs,
            "rng": encode(capture_rng(), "rng", other) if rng else None,
            "versions": versions(),
        }
        tensor_files[STATE_TENSORS] = other
        record = None if metric is None else {"name": self.metric_name, "value": float(metric), "mode": self.mode}
        return Snapshot(step=step, tensor_files=tensor_files, state=state, metric=record)

    def save(self, step: int, objects: dict[str, Any], *, metric: float | None = None,
             meta: dict[str, Any] | None = None, rng: bool = True) -> Path:
        """Checkpoint ``objects`` (name -> object with ``state_dict()``, or a plain dict) at ``step``.

        Returns the checkpoint's final path (with ``background=True`` it appears once the write ends;
        :meth:`wait` waits for it).  Raises an error a previous background write hit."""
        start = time.perf_counter()
        self.wait()
        if not self._cleaned:
            clean_stale(self.directory)
            self._cleaned = True
        snap = self.snapshot(step, objects, metric=metric, meta=meta, rng=rng)
        final = self.directory / checkpoint_name(step)
        if self.background:
            self._thread = threading.Thread(target=self._write_guarded, args=(snap,), name="overt-checkpoint")
            self._thread.start()
        else:
            try:
                self._write(snap)
            except Exception as exc:
                if is_disk_full(exc):
                    raise self._disk_full(step) from None
                raise
        self.blocking_s += time.perf_counter() - start
        return final

    def wait(self) -> None:
        """Wait for a background write to finish; re-raise its error, if any."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, CheckpointError):
                raise error
            if is_disk_full(error):
                raise self._disk_full(None) from None
            raise CheckpointError(f"writing a checkpoint in {self.directory} failed: {type(error).__name__}: {error}",
                                  why="the run has no checkpoint of its recent progress",
                                  fix="check free disk space and permissions of the checkpoint folder") from error

    def _disk_full(self, step: int | None) -> CheckpointError:
        from overt.errors import disk_full_message

        parts = disk_full_message(f"the checkpoint{f' of step {step}' if step is not None else ''} "
                                  "(nothing of it was kept)", self.directory)
        return CheckpointError(parts["what"], where=parts["where"], why=parts["why"], fix=parts["fix"])

    def _write_guarded(self, snap: Snapshot) -> None:
        try:
            self._write(snap)
        except BaseException as exc:  # reported by the next save() or wait()
            self._error = exc

    def _write(self, snap: Snapshot) -> None:
        path = write_snapshot(snap, self.directory)
        self.last_saved = path
        self.prune(protect=path)

    def prune(self, protect: Path | None = None) -> list[Path]:
        """Delete checkpoints the policy does not keep; returns the deleted paths."""
        entries = list_checkpoints(self.directory)
        keep = to_keep(entries, self.keep_last, self.keep_best, self.mode, protect)
        removed = [e.path for e in entries if e.path not in keep]
        for path in removed:
            remove_checkpoint(path)
        return removed

    # -- loading -------------------------------------------------------------------------------

    def checkpoints(self) -> list[Path]:
        """Checkpoint folders present, oldest first (not verified)."""
        return [e.path for e in list_checkpoints(self.directory)]

    def load(self, path: str | Path | None = None) -> Restored:
        """Read and verify one checkpoint (``path``), or the newest valid one in the directory."""
        self.wait()
        if path is not None:
            return Restored(verify_and_read(Path(path)))
        return Restored(read_newest_valid(self.directory, log=self.log))

    def restore(self, objects: dict[str, Any], *, path: str | Path | None = None, rng: bool = True,
                strict: bool = True) -> Restored:
        """Load a checkpoint (default: newest valid) into ``objects`` and the RNGs; returns what was read.

        Plain-dict entries (e.g. ``{"epoch": 3}`` saved as a dict) are in ``restored.objects``."""
        restored = self.load(path)
        for note in restored.apply(objects, rng=rng, strict=strict):
            self.log(f"overt: {note}")
        return restored
