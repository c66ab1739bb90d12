"""The default composition: the engine plus the plug-ins a config switches on.

The engine (:mod:`overt.engine`) runs exactly the callbacks it is given and imports none of
them.  This module, above it, is the one place that decides which plug-ins a run gets:
guards (:mod:`overt.guards`), checkpoints (:mod:`overt.checkpoint`), the run directory and
progress (:mod:`overt.run`), MLflow (:mod:`overt.integrations.mlflow`) and plots at the end
(:mod:`overt.report.callback`).  ``overt.Trainer``/``overt.fit`` and ``overt train``/``overt resume``
all build their runs here.  A new default plug-in is added in
:func:`default_callbacks`, switched by a config key.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import inspect

from overt.engine.loop import Trainer as EngineTrainer, make_config

#: the engine Trainer's own keyword arguments; every other keyword is a config override
_ENGINE_KEYWORDS = frozenset(inspect.signature(EngineTrainer.__init__).parameters)

if TYPE_CHECKING:
    from overt.config import TrainConfig
    import torch
    from torch import nn

    from overt.engine.callbacks import Callback
    from overt.engine.parallel import Parallel
    from overt.run.rundir import RunDir


def default_callbacks(cfg: TrainConfig, run_dir: Path | RunDir | None, user: Sequence[Callback] = (),
                      recipe_source: dict[str, Any] | None = None, *, main: bool | None = None) -> list[Callback]:
    """The callbacks of a run with this config, in calling order: guards, early stopping
    (``early_stop``; before the checkpoints, which save its count), checkpoints (when there is a
    run directory), the ``user``'s own, anomaly mode
    (``debug_anomaly``), MLflow (``mlflow``/``mlflow_uri``/``mlflow_experiment``), W&B (``wandb``/
    ``wandb_project``/``wandb_mode``), plots at the end (``plots``), then metrics log + TensorBoard,
    the run directory writer and ``metrics.csv`` (``metrics_csv``; when there is a run directory), then progress.  MLflow and the
    plots come before the run directory's writers so that an unusable tracking store or a
    missing matplotlib is an error before the run directory is written.  Under torchrun, guards
    and checkpoints run on every rank; whatever writes or prints only on the ``main`` process (rank 0;
    by default read from the torchrun environment)."""
    from overt.run.progress import progress_callback
    from overt.run.rundir import RunDir
    from overt.torchrun import Topology

    if main is None:
        main = Topology.of_process().is_main
    run = (run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)) if run_dir is not None else None
    run_dir = run.path if run is not None else None
    callbacks: list[Callback] = []
    if cfg.guards:
        from overt.guards.engine import GuardCallback
        from overt.guards.options import pyproject_ignore

        callbacks.append(GuardCallback(strict=cfg.strict, ignore=[*pyproject_ignore(), *cfg.ignore],
                                       report_path=str(run.guards) if run and main else None))
    if cfg.early_stop is not None:  # before the checkpoints: an epoch's checkpoint holds its count
        from overt.engine.early_stop import EarlyStopping

        callbacks.append(EarlyStopping(cfg.early_stop, cfg.early_stop_min_delta, monitor=cfg.monitor,
                                       mode=cfg.monitor_mode, verbose=main))
    if run is not None and cfg.checkpoint:
        from overt.checkpoint.callback import CheckpointCallback

        callbacks.append(CheckpointCallback(cfg, run, recipe_source=recipe_source))
    callbacks += user
    if cfg.debug_anomaly:
        from overt.engine.anomaly import AnomalyMode

        callbacks.append(AnomalyMode())
    if main and (cfg.mlflow or cfg.mlflow_uri or cfg.mlflow_experiment):
        from overt.integrations.mlflow import MLflowCallback

        callbacks.append(MLflowCallback(cfg.mlflow_uri, cfg.mlflow_experiment or "overt", run_dir=run_dir))
    if main and (cfg.wandb or cfg.wandb_project or cfg.wandb_mode):
        from overt.integrations.wandb import WandbCallback

        callbacks.append(WandbCallback(cfg.wandb_project, cfg.wandb_mode, run_dir=run_dir))
    if cfg.plots and main:
        if run_dir is None:
            from overt.errors import ConfigError

            raise ConfigError("plots=true, but this run has no run directory to draw them into",
                              fix="pass run_dir=... (overt train always has one), or set plots=false and "
                                  "call overt.report.write_report on a run directory later")
        from overt.report.callback import PlotsCallback

        callbacks.append(PlotsCallback(run))
    if run is not None and main:
        from overt.run.metrics_log import MetricsLog
        from overt.run.writer import RunWriter

        callbacks += [MetricsLog(run, tensorboard=cfg.tensorboard), RunWriter(run)]
        if cfg.metrics_csv:
            from overt.run.metrics_csv import MetricsCSV

            callbacks.append(MetricsCSV(run_dir))
    if main:
        from overt.engine.busy import BusyNote

        callbacks.append(BusyNote())  # an info line when a busy machine starves torch's threads
    progress = progress_callback(cfg.progress) if main else None
    if progress is not None:
        callbacks.append(progress)
    return callbacks


class Trainer(EngineTrainer):
    """``overt.Trainer``: the engine's :class:`~overt.engine.loop.Trainer` (same arguments) with
    the default plug-ins (:func:`default_callbacks`) around the user's ``callbacks``.

    With ``run_dir`` the run writes its directory (config, metrics.jsonl, TensorBoard events,
    checkpoints, model.safetensors, summary.json); without it nothing is written.  Example::

        trainer = overt.Trainer(model, optimizer, nn.CrossEntropyLoss(), train_ds, val_ds, epochs=5)
        summary = trainer.fit()
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[Any, Any], torch.Tensor], train_data: Any, val_data: Any = None, *,
                 config: TrainConfig | None = None, callbacks: Sequence[Callback] | None = None,
                 parallel: Parallel | None = None, run_dir: str | Path | RunDir | None = None,
                 recipe_source: dict[str, Any] | None = None, **kwargs: Any):
        from overt.run.rundir import RunDir

        cfg = make_config(config, {k: kwargs.pop(k) for k in list(kwargs) if k not in _ENGINE_KEYWORDS})
        self.run = (run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)) if run_dir is not None else None
        self.run_dir = self.run.path if self.run is not None else None
        self.recipe_source = recipe_source  # recorded in checkpoints (overt train sets it; see train_recipe)
        if parallel is None:  # one process, or under torchrun the config's strategy; FSDP2 gathers the
            from overt.distributed.parallel import parallel_for  # whole final weights only to write them

            parallel = parallel_for(cfg, gather_final_weights=self.run_dir is not None)
        composed = default_callbacks(cfg, self.run, list(callbacks or []), recipe_source=recipe_source,
                                     main=parallel.is_main)
        super().__init__(model, optimizer, loss_fn, train_data, val_data, config=cfg, callbacks=composed,
                         parallel=parallel, **kwargs)


def fit(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[Any, Any], torch.Tensor],
    train_data: Any,
    val_data: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """``overt.Trainer(model, optimizer, loss_fn, train_data, val_data, **kwargs).fit()``."""
    return Trainer(model, optimizer, loss_fn, train_data, val_data, **kwargs).fit()


def inputs_record(recipe: Any) -> dict[str, Any]:
    """The record of what ``recipe`` trains on (:func:`overt.record.build_record`): its declared
    preprocessing, the model inputs' schema and statistics from a bounded sample, the classes."""
    from overt.record import build_record

    prep = recipe.preprocessing
    labels = (prep.labels if prep is not None else None) or recipe.meta.get("labels")
    return build_record(recipe.train_data, preprocessing=prep.to_dict() if prep is not None else None, labels=labels)


def train_recipe(cfg: TrainConfig, module: Any, resume: Any = None,
                 callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
    """Build a recipe module's run with ``cfg``, claim its run directory, train; the CLI's run.
    With ``resume`` (a checkpoint read by :func:`overt.checkpoint.find_checkpoint`) the run
    directory is reused and training continues from the checkpoint.  ``callbacks`` come after the
    recipe's own (``overt sweep``'s stop on a signal)."""
    from overt.torchrun import Topology
    from overt.engine.seeding import seed_everything
    from overt.recipes.base import build_recipe, recipe_source
    from overt.run.rundir import RunDir, check_claimable, claim, run_dir_for
    from overt.recipes.trust import remember
    from overt.run.writer import write_inputs_record, write_recipe_meta, write_recipe_source

    run_dir = run_dir_for(cfg.run_dir, cfg.runs_root, cfg.name, cfg.recipe)
    named = bool(cfg.run_dir or cfg.name)  # else a generated name, made unique when claimed
    main = Topology.of_process().is_main  # under torchrun only rank 0 claims and writes the run directory
    if resume is None and named and main:
        check_claimable(run_dir)  # before any data is loaded
    seed_everything(cfg.seed)  # model initialisation inside build() is seeded too
    recipe = build_recipe(module, cfg)  # a recipe that fails to build leaves no run directory behind
    if resume is None:  # under torchrun rank 0 claims it (and picks a unique name); the others follow
        from overt.distributed.group import on_rank0

        run = on_rank0(lambda: claim(run_dir, unique=not named))  # rank 0 holds its lock; the others a copy
    else:
        run = RunDir(run_dir)  # its lock is held by `overt resume`
    run_dir = run.path
    source = recipe_source(cfg.recipe)
    if main:
        remember(source)  # this machine ran this recipe's code: predict/export/resume may import it again
    try:
        try:
            trainer = Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                              scheduler=recipe.scheduler, scheduler_interval=recipe.scheduler_interval,
                              metrics=recipe.metrics, forward=recipe.forward, collate_fn=recipe.collate_fn,
                              train_transform=recipe.train_transform,
                              callbacks=[*recipe.callbacks, *callbacks], config=cfg, run_dir=run,
                              recipe_source=source)
            if main:
                write_recipe_meta(run, recipe.meta)
                write_recipe_source(run, source)
                if resume is None or not run.inputs.is_file():
                    write_inputs_record(run, inputs_record(recipe))
            if resume is not None:
                from overt.checkpoint.callback import restore_trainer

                restore_trainer(trainer, resume)
        except Exception as error:  # the run directory exists: it says why the run never started
            from overt.run.atomic import is_disk_full
            from overt.run.writer import failed_status, write_status

            if is_disk_full(error):
                from overt.errors import DiskFullError

                full = DiskFullError("the run's recipe_meta.json", run_dir)
                if main:
                    write_status(run, failed_status(full, step=None))
                raise full from None
            if main:
                write_status(run, failed_status(error, step=None))
            raise
        return trainer.fit()  # from here on the RunWriter records the status
    finally:
        run.lock().release()  # the lock claim() took (nothing where this object holds none)
