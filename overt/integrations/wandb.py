"""Weights & Biases as an engine callback (``wandb=true``; the ``wandb`` extra).

One W&B run per overt run, created with its own ``wandb.init(...)`` object (``reinit``
so a user's own W&B run is not touched):

- config: the resolved config, every key;
- metrics: every record ``metrics.jsonl`` gets, at the same step (log points and epoch ends);
- summary: ``overt/status``, ``overt/findings`` (a count) and the best value of ``monitor``;
  the guard findings as a ``overt/findings`` table of slug, code, step and message.

``wandb_mode``: ``online``, ``offline`` (no network: ``wandb sync`` later) or ``disabled``;
unset, W&B's own default (``WANDB_MODE``) applies.  Files go under ``RUN_DIR/wandb``.  If W&B
fails mid-run, training goes on: one warning is printed and ``metrics.jsonl`` still has
everything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.errors import OvertError

if TYPE_CHECKING:
    from overt.engine.loop import Trainer

EXTRA_HINT = ("pip install 'overt[wandb]'   (the wandb extra)"
              "; from a checkout on a CPU-only machine: "
              "pip install -c constraints-cpu.txt -e '.[wandb]' (keeps the CPU torch build)")


class WandbCallback(Callback):
    """Logs a run to Weights & Biases."""

    def __init__(self, project: str | None = None, mode: str | None = None, run_dir: str | Path | None = None,
                 entity: str | None = None):
        """Imports wandb now, so a missing extra is an error before anything is trained or written."""
        try:
            import wandb
        except ImportError:
            raise OvertError("wandb=true, but Weights & Biases (wandb) is not installed",
                             why="W&B logging is an optional extra of overt", fix=EXTRA_HINT) from None
        if mode not in (None, "online", "offline", "disabled"):
            raise OvertError(f"wandb_mode={mode!r} is not a W&B mode", fix="use online, offline or disabled")
        self.wandb = wandb
        self.project, self.mode, self.entity = project or "overt", mode, entity
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.run: Any = None
        self.failed: str | None = None

    def _guarded(self, what: str, fn: Any) -> None:
        if self.run is None or self.failed:
            return
        try:
            fn()
        except Exception as exc:  # W&B's failure loses the lines, not the run
            self.failed = f"{type(exc).__name__}: {exc}"
            print(f"overt: W&B logging failed while {what} ({self.failed}); it is off for the rest of this run "
                  f"(training goes on; metrics.jsonl has every record)", file=sys.stderr, flush=True)

    def on_fit_start(self, trainer: Trainer) -> None:
        kwargs: dict[str, Any] = {"project": self.project, "config": trainer.config.model_dump(mode="json"),
                                  "reinit": "create_new"}
        if self.mode is not None:
            kwargs["mode"] = self.mode
        if self.entity is not None:
            kwargs["entity"] = self.entity
        if self.run_dir is not None:
            from overt.run.rundir import RunDir

            run = RunDir(self.run_dir)
            run.folder(run.wandb)  # W&B writes its own files there: a linked wandb/ is refused, not followed
            kwargs.update(dir=str(self.run_dir), name=self.run_dir.name)
        try:
            self.run = self.wandb.init(**kwargs)
        except Exception as exc:
            raise OvertError(f"W&B could not start a run ({type(exc).__name__}: {exc})",
                             why="wandb=true asks for every metric in W&B; none would arrive",
                             fix="log in (wandb login), or set wandb_mode=offline to log without network") from exc

    def _log(self, record: dict[str, Any]) -> None:
        step = int(record["step"])
        values = {k: v for k, v in record.items() if k != "step" and isinstance(v, (int, float))}
        self._guarded("logging metrics", lambda: self.run.log(values, step=step))

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._log(dict(logs))

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._log({"step": trainer.state.global_step, "epoch": epoch + 1, **metrics})  # from 1, as printed

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        findings = summary.get("findings") or []

        def finish() -> None:
            self.run.summary["overt/status"] = summary.get("status", "completed")
            self.run.summary["overt/findings"] = len(findings)
            best = summary.get("best") or {}
            if best.get("value") is not None:
                self.run.summary[f"best/{best.get('metric')}"] = best["value"]
            if findings:
                table = self.wandb.Table(columns=["slug", "code", "step", "message"],
                                         data=[[f.get("slug"), f.get("code"), f.get("step"), f.get("message")]
                                               for f in findings])
                self.run.log({"overt/findings": table}, step=int(summary.get("steps", 0)))
            self.run.finish()

        self._guarded("finishing the run", finish)
        if self.failed and self.run is not None:
            try:
                self.run.finish(exit_code=1)
            except Exception:
                pass

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        if self.run is not None:
            try:
                self.run.finish(exit_code=1)
            except Exception:
                pass


__all__ = ["WandbCallback"]
