"""metrics.jsonl (one JSON object per logged point) and TensorBoard event files.

This module owns the format of ``metrics.jsonl``: it writes it, and trims it when a run
continues from a checkpoint."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.run.atomic import write_text_atomic
from overt.run.layout import METRICS, dumps_json
from overt.run.rundir import RunDir

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class MetricsLog(Callback):
    """Appends every logged point and every epoch's metrics to ``metrics.jsonl``
    (keys: ``step``, ``epoch`` and metric names, see :mod:`overt.engine.metrics`)
    and, when ``tensorboard``, to event files under ``tb/``.  A run that starts at step N
    (resumed from a checkpoint) first drops the records after step N: the crashed run wrote
    them, the resumed one writes them again.

    A writer that fails (a full disk, a vanished folder) is reported once on stderr and
    then left off; training goes on, and the checkpoints say whether the disk still takes
    writes (a failed checkpoint save stops the run with its own error)."""

    def __init__(self, run_dir: RunDir | Path, tensorboard: bool = True):
        self.run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.path = self.run.metrics
        self.tb_dir = self.run.tensorboard
        self.tensorboard = tensorboard
        self.failed: dict[str, str] = {}  # writer -> error, each reported once
        self._fh: Any = None
        self._tb: Any = None
        self._hook: Any = None

    def on_fit_start(self, trainer: Trainer) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_symlink():  # refused before anything reads or rewrites it
            os.close(self.run.open_append(self.path))
        if self.path.is_file():
            try:
                trim_after(self.path, trainer.state.global_step)
            except OSError as error:
                from overt.run.atomic import is_disk_full

                if not is_disk_full(error):
                    raise
                from overt.errors import DiskFullError

                raise DiskFullError(f"{self.path.name} (cut back to the resumed step)", self.path) from None
        try:
            self._fh = open(self.run.open_append(self.path), "a", buffering=1)  # never through a planted link
        except OSError as error:
            from overt.run.atomic import is_disk_full

            if not is_disk_full(error):
                raise
            from overt.errors import DiskFullError

            raise DiskFullError(self.path.name, self.path) from None
        if self.tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # heavy import: only when a run writes events

            tb_dir = self.run.folder(self.tb_dir)  # a linked tb/ is refused before TensorBoard writes into it
            self.run.check_no_links(tb_dir)  # TensorBoard names its own files: none of them may be a link
            self._tb = SummaryWriter(str(tb_dir))
            self._quiet_writer_thread()

    def _quiet_writer_thread(self) -> None:
        """TensorBoard writes from a thread that prints its OSError as a traceback before the main
        thread sees it; that error is reported once, by :meth:`_fail`, instead."""
        previous = threading.excepthook

        def hook(args: Any) -> None:
            if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError):
                return
            previous(args)

        self._hook, threading.excepthook = previous, hook

    def _fail(self, writer: str, exc: BaseException) -> None:
        if writer in self.failed:
            return
        self.failed[writer] = f"{type(exc).__name__}: {exc}"
        where = self.path if writer == METRICS else self.tb_dir
        print(f"overt: cannot write {writer} ({where}): {getattr(exc, 'strerror', None) or exc}; it is no longer "
              f"written for this run (training goes on; free disk space and check the checkpoints)",
              file=sys.stderr, flush=True)

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh is not None:
            try:
                self._fh.write(dumps_json(record, indent=None, default=None))
            except OSError as exc:
                self._fail(METRICS, exc)
                self._close_file()
        if self._tb is not None:
            try:
                for key, value in record.items():
                    if key not in ("step", "epoch") and isinstance(value, (int, float)):
                        self._tb.add_scalar(key, value, record["step"])
            except OSError as exc:
                self._fail("TensorBoard events", exc)
                self._close_tb()

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._write(dict(logs))

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._write({"step": trainer.state.global_step, "epoch": epoch + 1, **metrics})  # from 1, as printed

    def _close_file(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError as exc:
                self._fail(METRICS, exc)

    def _close_tb(self) -> None:
        tb, self._tb = self._tb, None
        try:
            if tb is not None:
                tb.close()
        except OSError as exc:
            self._fail("TensorBoard events", exc)
        finally:
            if self._hook is not None:
                threading.excepthook, self._hook = self._hook, None

    def _close(self) -> None:
        self._close_file()
        self._close_tb()

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._close()
        if self.failed:
            summary["logging_errors"] = dict(self.failed)

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        self._close()


def trim_after(path: Path, step: int) -> None:
    """Drop the records of ``path`` (a metrics.jsonl) logged after ``step``, and lines cut short."""
    from overt.run.reader import iter_metric_lines

    kept = []
    for line, record in iter_metric_lines(path):  # a line cut short by the crash is dropped
        at = record.get("step")
        if not isinstance(at, (int, float)) or at <= step:
            kept.append(line)
    write_text_atomic(path, "".join(line + "\n" for line in kept))
