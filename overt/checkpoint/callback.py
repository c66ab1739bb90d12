"""Checkpoints for the :class:`~overt.engine.loop.Trainer`: policy, preemption and exact resume.

What a Trainer checkpoint holds is what the Trainer says it is (:meth:`Trainer.state_objects
<overt.engine.loop.Trainer.state_objects>`; names in ``state.json``/``*.safetensors``):

- ``model``: the weights (``model.safetensors``);
- ``optimizer``, ``scheduler`` (when there is one), ``precision`` (GradScaler and skipped-step count);
- ``train_state``: epoch, global step, micro-batches and samples consumed in the epoch, best metric,
  early stopping's count (``callbacks``);
- ``loop``: the per-window losses of the unfinished epoch and log interval, so the epoch's
  train loss and the next logged point are the same as without the interruption;
- every RNG (python, numpy, torch CPU, each CUDA device), the resolved config and the versions.

Checkpoints are written only at optimizer-step boundaries (``on_step_end``, ``on_epoch_end`` and
when the run stops), where no accumulation window is open, so restoring the position and the
data order (a pure function of seed and epoch; the consumed samples are skipped without being
loaded) continues the run exactly.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.config import affects_result
from overt.checkpoint.checkpointer import Checkpointer, Restored
from overt.checkpoint.codec import CheckpointError
from overt.checkpoint.preempt import PreemptionHandler, exit_code, parse_signal
from overt.checkpoint.finite import all_finite, float_tensors, nonfinite_names
from overt.checkpoint.store import list_checkpoints, read_newest_valid, verify_and_read
from overt.run.layout import checkpoint_step
from overt.run.rundir import RunDir
from overt.engine.callbacks import Callback

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _position(trainer: Trainer) -> tuple[int, int, int]:
    s = trainer.state
    return s.epoch, s.global_step, s.batch_index


class CheckpointCallback(Callback):
    """Saves ``RUN_DIR/checkpoints/step-NNNNNN`` by the config's policy; turns SIGTERM, SIGINT and
    ``preempt_signal`` into finish-the-step, save, stop."""

    def __init__(self, cfg: Any, run_dir: RunDir | Path, recipe_source: dict[str, Any] | None = None):
        self.cfg = cfg
        self.run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.run_dir = self.run.path
        self.recipe_source = recipe_source  # {"spec", "file", "sha256"} of the recipe, checked by overt resume
        self.checkpointer = Checkpointer(self.run.checkpoints, keep_last=cfg.keep_last,
                                         keep_best=cfg.keep_best, mode=cfg.monitor_mode, metric_name=cfg.monitor,
                                         background=cfg.checkpoint_background)
        signals = [signal.SIGTERM, signal.SIGINT]
        if cfg.preempt_signal:
            extra = parse_signal(cfg.preempt_signal)
            if extra not in signals:
                signals.append(extra)
        self.preemption = PreemptionHandler(signals, self._on_signal, on_abort=self._on_abort)
        self.saves = 0
        self._trainer: Trainer | None = None
        self._saved_at: tuple[int, int, int] | None = None
        self._pending = False

    # -- saving --------------------------------------------------------------------------------

    def save(self, trainer: Trainer, kind: str, metric: float | None = None) -> Path | None:
        s = trainer.state
        self._check_finite(trainer)
        meta = {"kind": kind, "epoch": s.epoch, "global_step": s.global_step, "batch_index": s.batch_index,
                "config": trainer.config.model_dump(mode="json"), "run_dir": str(self.run_dir),
                "recipe_source": self.recipe_source, "world_size": trainer.parallel.world_size}
        # who writes what is the parallel protocol's: this process alone; rank 0 with every rank's RNG
        # states; or every rank its shards (the last two are collectives)
        path = trainer.parallel.save_checkpoint(self.checkpointer, s.global_step, trainer.state_objects(),
                                                metric=metric, meta=meta)
        self._saved_at = _position(trainer)
        if path is not None:  # None: another rank wrote it
            self.saves += 1
        return path

    def _check_finite(self, trainer: Trainer) -> None:
        """Refuse to save NaN/inf weights, optimizer state or loss over the good checkpoints: one
        reduction on the device and one host read per save (the save reads the device anyway)."""
        model_state = trainer.model.state_dict()
        optimizer_state = list(float_tensors(list(trainer.optimizer.state.values())))
        loss = [trainer.last_loss] if trainer.last_loss is not None and trainer.precision.mode != "fp16" else []
        tensors = [t for _, t in float_tensors(model_state)] + [t for _, t in optimizer_state] + loss
        if trainer.parallel.all_true(all_finite(tensors), trainer.device):  # every rank refuses, or none
            return
        bad = nonfinite_names(float_tensors(model_state))
        if nonfinite_names(optimizer_state):
            bad.append("the optimizer's state")
        if loss and nonfinite_names([("the training loss", loss[0])]):
            bad.append("the training loss")
        raise CheckpointError(
            f"the state at step {trainer.state.global_step} holds NaN/inf ({', '.join(bad[:6])}"
            f"{', ...' if len(bad) > 6 else ''}); it was not saved",
            where=f"{self.checkpointer.directory} (newest finite checkpoint: {self._last_good() or 'none yet'})",
            why="a checkpoint of diverged weights is useless to continue from, and saving it would rotate the "
                "good checkpoints out (keep_last)",
            fix=self._continue_hint(),
        )

    def _last_good(self) -> str | None:
        try:
            self.checkpointer.wait()
        except CheckpointError:
            pass
        entries = list_checkpoints(self.checkpointer.directory)
        return str(entries[-1].path) if entries else None

    def _continue_hint(self) -> str:
        last = self._last_good()
        where = (f"`overt resume {self.run_dir}` continues from {Path(last).name} (the newest finite checkpoint)"
                 if last else f"start the run again (rm -r {self.run_dir}): it has no finite checkpoint")
        return ("find where NaN/inf comes from (NaN/inf in the inputs or labels, log/sqrt/division of zero in "
                "the loss, a learning rate that is too high, fp16 overflow: use bf16); then " + where)

    def _on_abort(self, sig: signal.Signals) -> None:
        """A new request after the grace period ends the process at once: say so in status.json, which
        still says running (rank 0 writes the run directory)."""
        from overt.run.writer import write_status

        if self._trainer is not None and not self._trainer.parallel.is_main:
            return
        step = self._trainer.state.global_step if self._trainer is not None else None
        write_status(self.run_dir, {"status": "killed", "error": f"a second {sig.name} ended the process at once "
                                    "(no checkpoint of the last steps)", "step": step})

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._trainer is not None and self._trainer.parallel.world_size == 1:
            self._trainer.should_stop = True  # nothing else here: the loop stops at the step boundary
        # several processes: the signal is only recorded; all ranks decide together in _agree

    def _agree(self, trainer: Trainer) -> None:
        """Multi-process runs: stop when any rank got a signal, all after the same step (a collective,
        at log points and epoch ends; see overt/distributed/stop.py)."""
        if trainer.parallel.world_size == 1 or trainer.should_stop:
            return
        sig = trainer.parallel.agree_stop(self.preemption.received, trainer.device)
        if sig is not None:
            trainer.should_stop = True
            if self.preemption.received is None:
                self.preemption.received = sig  # this rank exits like the one that was signalled

    # -- hooks ---------------------------------------------------------------------------------

    def on_fit_start(self, trainer: Trainer) -> None:
        self.run.folder(self.run.checkpoints, create=False)  # a linked checkpoints/ would save outside the run
        self._trainer = trainer
        self.preemption.install()
        self._saved_at = _position(trainer) if trainer.resumed_from is not None else None

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._agree(trainer)

    def on_step_end(self, trainer: Trainer, logs: dict[str, Any]) -> None:
        every = self.cfg.checkpoint_every_steps
        if not every or trainer.state.global_step % every or trainer.should_stop:
            return  # (a stopping run saves in on_summary)
        if logs["epoch_end"]:
            self._pending = True  # the epoch's last step: save after validation, in on_epoch_end
        else:
            self.save(trainer, "step")

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._agree(trainer)
        every = self.cfg.checkpoint_every_epochs
        if self._pending or (every and (epoch + 1) % every == 0):
            self.save(trainer, "epoch", metric=metrics.get(self.cfg.monitor))
        self._pending = False

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        try:
            if _position(trainer) != self._saved_at:
                self.save(trainer, "stop" if trainer.should_stop else "final")
            self.checkpointer.wait()
        finally:
            self.preemption.uninstall(finished=True)  # training is over: what follows only writes and exits
        last = self.checkpointer.last_saved or trainer.resumed_from
        info: dict[str, Any] = {"dir": str(self.checkpointer.directory), "saved": self.saves,
                                "last": str(last) if last else None}
        if trainer.resumed_from is not None:
            info["resumed_from"] = trainer.resumed_from
        summary["checkpoint"] = info
        sig = self.preemption.received
        if sig is not None:
            summary["preempted"] = {"signal": sig.name, "exit_code": exit_code(sig), "checkpoint": info["last"]}
            if trainer.parallel.is_main:
                _stderr(f"overt: stopped on {sig.name} after step {trainer.state.global_step}; saved {info['last']}; "
                        f"continue with `overt resume {self.run_dir}`")

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        try:
            self.checkpointer.wait()  # a write in flight completes (or fails) before the process ends
        except CheckpointError:
            pass
        finally:
            self.preemption.uninstall()
        if getattr(getattr(error, "finding", None), "slug", None) == "non-finite":  # the guards stopped the run
            _stderr(f"overt: newest finite checkpoint: {self._last_good() or 'none'}; {self._continue_hint()}")


# -- resuming --------------------------------------------------------------------------------------

def find_checkpoint(path: str | Path, log: Any = _stderr) -> Restored:
    """Newest valid checkpoint of a run directory (or of a ``checkpoints`` folder), or one checkpoint folder."""
    path = Path(path)
    if checkpoint_step(path.name) is not None or path.is_file():
        return Restored(verify_and_read(path))
    if not path.is_dir():
        raise CheckpointError(f"{path} does not exist", fix="give the run directory of the run to continue")
    run = RunDir(path)
    root = run.checkpoint_root()
    if not list_checkpoints(root) and run.config.is_file():
        from overt.run.rundir import written_by_overt

        again = (f"delete the folder (rm -r {path}) and run the same `overt train` command" if written_by_overt(path)
                 else "run the same `overt train` command into a new folder (name= or run_dir=)")
        raise CheckpointError(
            f"run {path} has no checkpoint to continue from",
            why="it ended before its first checkpoint was written (or it was trained with checkpoint=false)",
            fix=f"start it again: {again} (checkpoint_every_steps=N saves more often than once per epoch)",
        )
    restored = _newest_usable(root, log)
    if root != path:
        _check_belongs(restored, path)
    return restored


def _newest_usable(root: Path, log: Any) -> Restored:
    """The newest checkpoint under ``root`` that verifies, decodes, and (sharded, FSDP2) whose every
    shard matches its hash; a newer one failing any of these is named and skipped."""
    found: list[Restored] = []

    def usable(loaded: Any) -> None:
        restored = Restored(loaded)
        if restored.meta.get("sharded"):
            from overt.checkpoint.shards import verify_shards

            verify_shards(restored)
            restored.shards_verified = True
        found.append(restored)

    loaded = read_newest_valid(root, log=log, check=usable)
    restored = found[-1]
    restored.skipped = loaded.skipped
    return restored


def _check_belongs(restored: Restored, run_dir: Path) -> None:
    """Refuse a checkpoint that lives outside ``run_dir`` (a ``checkpoints`` link to another folder)
    and was written by another run: continuing from it would graft another run onto this one."""
    real_ckpt, real_run = restored.path.resolve(), run_dir.resolve()
    saved = restored.meta.get("run_dir")
    if real_ckpt.is_relative_to(real_run) or not saved or Path(saved).resolve() == real_run:
        return
    raise CheckpointError(
        f"the checkpoint {restored.path} belongs to another run",
        where=f"it is {real_ckpt} (through a link), written by the run {saved}; resuming {run_dir}",
        why="continuing from it would graft another run's weights and position onto this run's logs",
        fix=f"resume that run itself (`overt resume {saved}`), or remove the link {RunDir(run_dir).checkpoints}",
    )


def restore_trainer(trainer: Trainer, restored: Restored, log: Any = _stderr) -> Restored:
    """Put ``restored`` into ``trainer``'s parts (:meth:`~overt.engine.loop.Trainer.state_objects`)
    and RNG states; ``trainer.resumed_from`` names the checkpoint.

    Bad newer checkpoints that were skipped are renamed ``*.bad`` so the resumed run's
    policy never counts them.  (The run directory's ``metrics.jsonl`` drops its records after
    the resumed step itself, when the run starts.)"""
    objects = trainer.state_objects()
    saved = restored.objects
    sharded = bool(restored.meta.get("sharded"))
    parallel = trainer.parallel
    if sharded != parallel.sharded_state:
        raise CheckpointError(f"{restored.path} was saved {'sharded (strategy=fsdp)' if sharded else 'whole'}; "
                              f"this run uses strategy={parallel.strategy}",
                              fix="resume with the strategy the run was saved with")
    _check_same_on_every_rank(restored)
    built = _hyperparameters(trainer.optimizer, scheduled=trainer.scheduler is not None)  # before anything is loaded
    if sharded:  # model and optimizer from the shards, resharded to this run's processes (a collective)
        parallel.load_sharded(restored, trainer.model, trainer.optimizer)
        objects = {k: v for k, v in objects.items() if k not in ("model", "optimizer")}
    for required in ("train_state",) if sharded else ("model", "optimizer", "train_state"):
        if required not in saved:
            raise CheckpointError(f"{restored.path} is not a Trainer checkpoint: it holds no {required!r}",
                                  fix="restore it with Checkpointer.restore(...) and the objects it was saved with")
    if ("scheduler" in objects) != ("scheduler" in saved):
        has = "has" if "scheduler" in saved else "has no"
        raise CheckpointError(f"{restored.path} {has} scheduler state, but this Trainer "
                              f"{'has a' if 'scheduler' in objects else 'has no'} scheduler",
                              why="the learning-rate schedule would not continue where it stopped",
                              fix="build the run the same way as the one that was saved")
    notes = restored.apply({k: v for k, v in objects.items() if k in saved}, rng=False, strict=True)
    notes += _reapply_hyperparameters(trainer, built, restored)
    rng = restored.rng
    if parallel.world_size > 1 or "rank_rng" in saved:  # each rank its own RNG states
        from overt.checkpoint.ranks import adapt_position, own_rng

        rng, note = own_rng(restored, parallel.rank, parallel.world_size)
        notes += [note] if note else []
        notes += adapt_position(trainer, restored.meta)
    if rng is not None:
        notes += trainer.load_rng_state(rng)
    main = parallel.is_main
    for note in notes if main else []:
        log(f"overt: {note}")
    trainer.resumed_from = str(restored.path)
    changed = _config_changes(restored.meta.get("config", {}), trainer.config.model_dump(mode="json"))
    if changed and main:
        log("overt: resuming with changed settings (the result may differ from an uninterrupted run): "
            + ", ".join(changed))
    _check_schedule_horizon(trainer, restored)
    for bad, _ in restored.skipped if main else []:
        target = bad.with_name(bad.name + ".bad")
        try:
            bad.rename(target)
            log(f"overt: moved the unusable checkpoint {bad.name} aside to {target.name}")
        except OSError:
            pass
    s = trainer.state
    if main:
        log(f"overt: resuming from {restored.path} ({position(s, trainer.config.epochs)})")
    return restored


def position(s: Any, epochs: int) -> str:
    """Where a restored state stands, counted as the console counts epochs (from 1): at an epoch
    boundary it has finished ``s.epoch`` epochs (``epoch 41`` of a finished 40-epoch run would be an
    epoch that does not exist)."""
    if s.batch_index == 0:
        done = f"after epoch {s.epoch} of {epochs}" if s.epoch else "before the first epoch"
        return f"{done}, step {s.global_step}"
    return f"epoch {s.epoch + 1} of {epochs}, step {s.global_step}, {s.batch_index} micro-batches into the epoch"


def _check_same_on_every_rank(restored: Restored) -> None:
    """Every rank chose its checkpoint on its own (skipping damaged ones); they must have chosen the
    same one, or the ranks would continue from different steps (a collective, in a process group)."""
    import torch.distributed as dist

    from overt.torchrun import Topology

    size = Topology.of_group().world_size
    if size == 1:
        return
    chosen: list[Any] = [None] * size
    dist.all_gather_object(chosen, Path(restored.path).name)
    if len(set(chosen)) > 1:
        raise CheckpointError(f"the ranks chose different checkpoints to resume from: "
                              f"{', '.join(f'rank {r}: {c}' for r, c in enumerate(chosen))}",
                              why="a checkpoint readable on one machine and not on another; continuing would mix "
                                  "steps",
                              fix="check the run directory's file system on every node, then resume again")


def resume(trainer: Trainer, path: str | Path | None = None, log: Any = _stderr) -> Restored:
    """Continue ``trainer`` from the newest valid checkpoint of its run directory (``overt.Trainer``'s
    ``run_dir``) or of ``path``.  Call before ``trainer.fit()``; the fit then continues exactly where
    the checkpoint was taken."""
    if path is None:
        run_dir = getattr(trainer, "run_dir", None)  # the engine's own Trainer has no run directory
        if run_dir is None:
            raise CheckpointError("resume() needs a run directory: this Trainer has none",
                                  fix="pass run_dir= to the Trainer, or resume(trainer, path)")
        path = run_dir
    return restore_trainer(trainer, find_checkpoint(path, log=log), log=log)


def _check_schedule_horizon(trainer: Trainer, restored: Restored) -> None:
    """A schedule with a fixed length (OneCycleLR's ``total_steps``) keeps its saved length: refuse a
    resumed run that is now longer, before training, instead of failing when the schedule runs out."""
    saved = getattr(trainer.scheduler, "total_steps", None)
    wanted = trainer.total_steps if trainer.scheduler_interval == "step" else trainer.config.epochs
    if isinstance(saved, int) and wanted is not None and wanted > saved:
        unit = "optimizer steps" if trainer.scheduler_interval == "step" else "epochs"
        raise CheckpointError(
            f"the saved {type(trainer.scheduler).__name__} schedule covers {saved} {unit}; "
            f"the resumed run now has {wanted}",
            where=str(restored.path),
            why="the schedule's length is part of its saved state; it would run out mid-training",
            fix="resume with the saved number of epochs, or start a new run from these weights "
                "(overt.checkpoint.load_weights) with a new schedule",
        )


# Optimizer hyperparameters a run's config can set.  With a scheduler, the group's ``lr`` is the
# schedule's current value and cyclic schedules also move momentum/betas: compare ``initial_lr``.
_HYPER = ("lr", "weight_decay", "momentum", "dampening", "betas", "eps", "alpha", "nesterov", "amsgrad")
_HYPER_SCHEDULED = ("initial_lr", "max_lr", "weight_decay", "dampening", "eps", "alpha", "nesterov", "amsgrad")


def _hyperparameters(optimizer: Any, scheduled: bool) -> list[dict[str, Any]]:
    keys = _HYPER_SCHEDULED if scheduled else _HYPER
    return [{k: tuple(g[k]) if isinstance(g[k], (list, tuple)) else g[k] for k in keys if k in g}
            for g in optimizer.param_groups]


def _reapply_hyperparameters(trainer: Trainer, built: list[dict[str, Any]], restored: Restored) -> list[str]:
    """The optimizer's saved state carries its hyperparameters, so ``overt resume RUN lr=1e-4`` would
    otherwise train on at the saved learning rate while saying it changed.  Hyperparameters that the
    rebuilt optimizer has and the checkpoint's lacks are applied (and said); a changed learning rate
    under a scheduler, whose saved state drives the rate, is refused."""
    scheduled = trainer.scheduler is not None
    now = _hyperparameters(trainer.optimizer, scheduled)
    notes = []
    for index, (wanted, loaded) in enumerate(zip(built, now)):
        for key, value in wanted.items():
            if loaded.get(key) == value:
                continue
            if key in ("initial_lr", "max_lr"):
                raise CheckpointError(
                    f"the learning rate changed on resume (param group {index}: {key} "
                    f"{loaded.get(key)!r} in the checkpoint, {value!r} now), but the run has a scheduler",
                    where=str(restored.path),
                    why="the scheduler's saved state sets the learning rate at every step, so the new rate "
                        "would be silently ignored",
                    fix="resume with the saved learning rate, or start a new run from these weights "
                        "(overt.checkpoint.load_weights) with the new rate and a new schedule",
                )
            trainer.optimizer.param_groups[index][key] = value
            notes.append(f"applied the changed optimizer setting {key} {loaded.get(key)!r} -> {value!r} "
                         f"(param group {index}) over the checkpoint's")
    return notes


def _config_changes(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return [f"{k}: {saved.get(k)!r} -> {now.get(k)!r}" for k in sorted(set(saved) | set(now))
            if affects_result(k) and saved.get(k) != now.get(k)]
