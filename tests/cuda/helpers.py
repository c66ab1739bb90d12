"""What the CUDA tests share: a tiny GPT recipe run, and counting host-device synchronisations.

``SyncLog`` switches ``torch.cuda.set_sync_debug_mode("warn")`` on and records every
synchronising CUDA call (PyTorch warns "called a synchronizing CUDA operation") with the
optimizer step it happened in; ``SyncStrict`` is a callback that turns the mode to ``"error"``
for the steps that must not synchronise (neither logged nor checked by the guards), so the first
sync there raises with its stack.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch

import overt

REPO = Path(__file__).resolve().parents[2]
SYNC_TEXT = "synchronizing CUDA operation"


def carried_text() -> Path | None:
    """Tiny Shakespeare where the GPU check carries it (``.gpudata/`` in the checkout, or $OVERT_GPT_TEXT)."""
    for candidate in (os.environ.get("OVERT_GPT_TEXT"), REPO / ".gpudata" / "tinyshakespeare" / "input.txt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


TINY_GPT = {"layers": 2, "heads": 2, "embed": 64, "context": 64, "stride": 32, "limit_chars": 60000,
            "batch_size": 32, "val_batch_size": 64, "dropout": 0.1}


def gpt_recipe(text: Path, **overrides: Any) -> tuple[Any, Any]:
    """(recipe, config) of the built-in ``gpt`` recipe at a small size, on CUDA, quiet."""
    from overt.engine.seeding import seed_everything
    from overt.recipes.base import build_recipe, recipe_config

    values = {**TINY_GPT, "text": str(text), "device": "cuda", "progress": "off", "tensorboard": False,
              "ignore": ["effective-batch-size"], **overrides}
    module, cfg = recipe_config("gpt", values)
    seed_everything(cfg.seed)
    return build_recipe(module, cfg), cfg


def gpt_trainer(text: Path, callbacks: list[Any] = (), engine: bool = False, run_dir: Any = None,
                **overrides: Any) -> Any:
    """``overt.Trainer`` (default guards; ``engine=True``: the bare engine Trainer) on the tiny gpt."""
    from overt.engine.loop import Trainer as EngineTrainer

    recipe, cfg = gpt_recipe(text, **overrides)
    kwargs = dict(metrics=recipe.metrics, callbacks=[*recipe.callbacks, *callbacks], config=cfg)
    if engine:
        return EngineTrainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                             **kwargs)
    return overt.Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                         run_dir=run_dir, **kwargs)


class SyncLog:
    """Within ``with SyncLog() as log``: every synchronising CUDA call is counted in
    ``log.by_step[step]`` (``step``: what :meth:`at` last set; -1 before the first)."""

    def __init__(self) -> None:
        self.step: Any = -1
        self.by_step: dict[Any, int] = {}
        self.where: dict[Any, list[str]] = {}

    def at(self, step: Any) -> None:
        self._collect()
        self.step = step

    def _collect(self) -> None:
        records, self._records[:] = list(self._records), []
        for r in records:
            if SYNC_TEXT in str(r.message):
                self.by_step[self.step] = self.by_step.get(self.step, 0) + 1
                self.where.setdefault(self.step, []).append(f"{r.filename}:{r.lineno}")

    def __enter__(self) -> "SyncLog":
        self._old = torch.cuda.get_sync_debug_mode()
        self._catch = warnings.catch_warnings(record=True)
        self._records = self._catch.__enter__()
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode(self._old)
        self._collect()
        self._catch.__exit__(*exc)


def guard_session(trainer: Any) -> Any:
    """The guard session of an ``overt.Trainer`` (None without guards)."""
    from overt.guards.engine import GuardCallback

    for cb in trainer.callbacks:
        if isinstance(cb, GuardCallback):
            return cb.session
    return None


class StepMarks(overt.Callback):
    """Labels each step for a :class:`SyncLog`, and records which steps were logged and which the
    guards checked (``checked``); with ``strict``, the other steps run under sync debug mode
    "error", so a synchronisation there raises where it happens."""

    def __init__(self, log: SyncLog | None = None, strict: bool = False):
        self.log, self.strict = log, strict
        self.checked: set[int] = set()
        self.logged: set[int] = set()
        self.steps = 0

    def on_batch_start(self, trainer: Any, batch: Any, index: int) -> None:
        step = trainer.state.global_step + 1  # the step this micro-batch belongs to (1-based)
        if self.log is not None:
            self.log.at(step)
        session = guard_session(trainer)
        armed = session is not None and (session.armed or session.step < session.options.warmup_steps)
        if armed:
            self.checked.add(step)
        logged = step % trainer.config.log_every == 0
        if logged:
            self.logged.add(step)
        if self.strict:
            torch.cuda.set_sync_debug_mode("warn" if (armed or logged) else "error")

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        self.steps = trainer.state.global_step
        if self.strict:
            torch.cuda.set_sync_debug_mode("warn")
        if self.log is not None:
            self.log.at(("after", self.steps))  # until the next step: the loader, epoch ends, validation

    def on_epoch_end(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> None:
        if self.strict:
            torch.cuda.set_sync_debug_mode("warn")


def unexpected_syncs(log: SyncLog, marks: StepMarks, steps_per_epoch: int) -> dict[Any, list[str]]:
    """Where a synchronisation happened that should not have: a step (1-based) neither logged nor
    checked by the guards, or the time between two steps (the loader: ``("after", step)``) other
    than at an epoch's end (epoch metrics, validation) or after a logged or checked step."""
    def allowed(label: Any) -> bool:
        if label == -1:  # before the first step: the run's start
            return True
        if isinstance(label, tuple):
            s = label[1]
            return s % steps_per_epoch == 0 or s in marks.logged or s in marks.checked
        return label in marks.checked or label in marks.logged
    return {s: log.where.get(s, []) for s, n in log.by_step.items() if n and not allowed(s)}
