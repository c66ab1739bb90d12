"""Writes a run directory: config.yaml at the start; model.safetensors and
summary.json only when training finished; status.json saying why otherwise.

A directory with ``summary.json`` is a finished run; one without it is not
(a failed run has ``status.json`` with the error)."""

from __future__ import annotations

import hashlib
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.errors import DiskFullError, OvertError
from overt.run.atomic import is_disk_full, write_text_atomic
from overt.run.layout import dumps_json
from overt.run.rundir import RunDir

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


def _run(run_dir: RunDir | str | Path) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)


def write_recipe_meta(run_dir: RunDir | Path, meta: dict[str, Any]) -> None:
    """``recipe_meta.json``: what prediction needs from the training split (a recipe's ``meta``,
    see :class:`overt.Recipe`)."""
    run = _run(run_dir)
    run.write_json(run.recipe_meta, meta, indent=1, default=None)


def write_recipe_source(run_dir: RunDir | Path, source: dict[str, Any]) -> None:
    """``recipe_source.json``: which recipe file (and its sha256) trained the run, checked by
    ``overt predict``/``export`` before they import it (:mod:`overt.recipes.trust`)."""
    run = _run(run_dir)
    run.write_json(run.recipe_source, source, indent=1, default=None)


def write_inputs_record(run_dir: RunDir | Path, record: dict[str, Any]) -> None:
    """``inputs.json``: what the model is trained on (:mod:`overt.record`), written once at the start."""
    run = _run(run_dir)
    run.write_json(run.inputs, record, indent=None, default=None)


def write_status(run_dir: RunDir | Path, status: dict[str, Any]) -> bool:
    """Write ``status.json`` atomically; when that fails (a full disk has no room for the temporary
    file), overwrite the existing file in place, which reuses its blocks.  Returns whether it was
    written; a failure is said on stderr (once per call), never raised: the status must not hide
    the error that is being recorded."""
    path = _run(run_dir).status
    text = dumps_json(status)
    try:
        write_text_atomic(path, text)
        return True
    except OSError as first:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                data = text.encode()
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
                os.fsync(fd)
            finally:
                os.close(fd)
            return True
        except OSError:
            print(f"overt: cannot record the run's status in {path} ({first.strerror or first}); "
                  f"it was: {status.get('status')}", file=sys.stderr, flush=True)
            return False


def failed_status(error: BaseException, **where: Any) -> dict[str, Any]:
    """The ``status.json`` of a run that ended on ``error``."""
    return {
        "status": "interrupted" if isinstance(error, KeyboardInterrupt) else "failed",
        "error": f"{type(error).__name__}: {error}",
        **where,
        "traceback": traceback.format_exception(type(error), error, error.__traceback__)[-3:],
    }


class RunWriter(Callback):
    """Writes the run directory's config, status, final weights and summary.  Holds the
    directory's lock (:meth:`RunDir.lock`) while the run trains, unless an owner in this process
    (``overt train``, ``overt resume``) already holds it for the whole command."""

    def __init__(self, run_dir: RunDir | Path):
        self.run = _run(run_dir)
        self.run_dir = self.run.path
        self._owns_lock = False

    def on_fit_start(self, trainer: Trainer) -> None:
        run = self.run
        run.path.mkdir(parents=True, exist_ok=True)
        if not run.held_here():
            run.lock().acquire()  # this writer owns the lock for the fit (overt.Trainer from Python)
            self._owns_lock = True
        try:
            run.write_text(run.config, trainer.config.to_yaml())
            run.write_json(run.status, {"status": "running", "pid": os.getpid()}, indent=None)
        except BaseException as error:  # (the engine calls no on_exception for a failing on_fit_start)
            if is_disk_full(error):
                error = DiskFullError("the run's config.yaml and status.json", self.run_dir)
            write_status(run, failed_status(error, epoch=trainer.state.epoch, step=trainer.state.global_step))
            self._unlock()
            if isinstance(error, DiskFullError):
                raise error from None
            raise

    def _unlock(self) -> None:
        if self._owns_lock:  # only the lock this writer took
            self._owns_lock = False
            self.run.lock().release()

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        summary["run_dir"] = str(self.run_dir)

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        from safetensors.torch import save_file, save_model

        whole = trainer.parallel.final_weights(trainer.model)  # gathered from every rank's shards (FSDP2)
        try:
            with self.run.atomic(self.run.weights) as tmp:
                if whole is not None:
                    save_file({k: v.contiguous() for k, v in whole.items()}, str(tmp), metadata={"format": "pt"})
                else:
                    save_model(trainer.model, str(tmp))
                with open(tmp, "rb") as fh:  # overt predict/export check model.safetensors against this hash
                    summary["weights_sha256"] = hashlib.sha256(fh.read()).hexdigest()
            self.run.write_json(self.run.summary, summary)
        except BaseException as error:  # e.g. a full disk: the run is not finished, and says why
            if is_disk_full(error):
                error = DiskFullError("the finished run's model.safetensors and summary.json "
                                      "(without them the run does not count as finished)", self.run_dir)
            elif isinstance(error, OSError):
                error = OvertError(f"cannot write the finished run's files into {self.run_dir}: "
                                   f"{error.strerror or error}",
                                   why="without model.safetensors and summary.json the run does not count as finished",
                                   fix=f"free disk space, then `overt resume {self.run_dir}` finishes it from its "
                                       "last checkpoint")
            write_status(self.run, failed_status(error, epoch=trainer.state.epoch, step=trainer.state.global_step))
            raise error from None
        else:
            write_status(self.run, {"status": summary.get("status", "completed")})
        finally:
            self._unlock()

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        try:
            if is_disk_full(error) and not isinstance(error, OvertError):
                error = DiskFullError(f"a file of the run ({type(error).__name__}: {error})", self.run_dir)
            write_status(self.run, failed_status(error, epoch=trainer.state.epoch, step=trainer.state.global_step))
        finally:
            self._unlock()
