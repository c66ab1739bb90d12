"""The callbacks every Trainer gets from its config.

``early`` callbacks (guards, checkpoints) run before the user's own, so what
they add to the summary is there when the ``late`` ones (run directory writer,
metrics log, progress) write and print it."""

from __future__ import annotations

from pathlib import Path

from overt.config import TrainConfig
from overt.engine.callbacks import Callback


def default_callbacks(cfg: TrainConfig, run_dir: Path | None) -> tuple[list[Callback], list[Callback]]:
    """``(early, late)`` callbacks for a run with this config."""
    from overt.run.progress import progress_callback

    early: list[Callback] = []
    late: list[Callback] = []
    if cfg.guards:
        from overt.guards.engine import GuardCallback
        from overt.guards.options import pyproject_ignore

        early.append(GuardCallback(strict=cfg.strict, ignore=[*pyproject_ignore(), *cfg.ignore],
                                   report_path=str(run_dir / "guards.json") if run_dir else None))
    if run_dir is not None and cfg.checkpoint:
        from overt.checkpoint.callback import CheckpointCallback

        early.append(CheckpointCallback(cfg, run_dir))
    if run_dir is not None:
        from overt.run.metrics_log import MetricsLog
        from overt.run.writer import RunWriter

        late += [MetricsLog(run_dir, tensorboard=cfg.tensorboard), RunWriter(run_dir)]
    progress = progress_callback(cfg.progress)
    if progress is not None:
        late.append(progress)
    return early, late
