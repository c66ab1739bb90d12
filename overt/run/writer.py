"""Writes a run directory: config.yaml at the start; model.safetensors and
summary.json only when training finished; status.json saying why otherwise.

A directory with ``summary.json`` is a finished run; one without it is not
(a failed run has ``status.json`` with the error)."""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.run.atomic import atomic_path, write_text_atomic
from overt.run.rundir import STATUS, SUMMARY

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class RunWriter(Callback):
    """config.yaml and status.json at the start; model.safetensors, summary.json and status.json at the end."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)

    def on_fit_start(self, trainer: Trainer) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.run_dir / "config.yaml", trainer.config.to_yaml())
        write_text_atomic(self.run_dir / STATUS, json.dumps({"status": "running"}) + "\n")

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        summary["run_dir"] = str(self.run_dir)

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        from safetensors.torch import save_model

        with atomic_path(self.run_dir / "model.safetensors") as tmp:
            save_model(trainer.model, str(tmp))
        status = {"status": summary.get("status", "completed")}
        write_text_atomic(self.run_dir / SUMMARY, json.dumps(summary, indent=2, default=str) + "\n")
        write_text_atomic(self.run_dir / STATUS, json.dumps(status) + "\n")

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        status = {
            "status": "interrupted" if isinstance(error, KeyboardInterrupt) else "failed",
            "error": f"{type(error).__name__}: {error}",
            "epoch": trainer.state.epoch,
            "step": trainer.state.global_step,
            "traceback": traceback.format_exception(type(error), error, error.__traceback__)[-3:],
        }
        write_text_atomic(self.run_dir / STATUS, json.dumps(status, indent=2) + "\n")
