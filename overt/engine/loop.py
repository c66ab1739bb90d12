"""The training loop.

Read :meth:`Trainer.fit` and :meth:`Trainer.train_epoch` top to bottom: it is
the canonical PyTorch loop -- ``model.train()``, batch to device, forward
through ``__call__``, loss, backward, optimizer step, reset gradients,
scheduler -- with precision, accumulation, clipping and validation each in
one place, and everything else (logging, progress, guards, checkpoints)
plugged in as :class:`~overt.engine.callbacks.Callback`\\ s.

This Trainer runs exactly the callbacks it is given.  ``overt.Trainer`` (in
:mod:`overt.compose`) is this Trainer with the default set (guards, checkpoints,
run directory, progress) composed from the config.
"""

from __future__ import annotations

import math
import platform
import time
from typing import Any, Callable, Literal

import torch
from torch import nn

from overt.config import TrainConfig
from overt.engine.accumulation import WindowPlan
from overt.engine.augment import Augmented, augmented
from overt.engine.callbacks import Callback, CallbackList
from overt.engine.data import (batch_sizes, check_not_empty, is_ready_loader, num_batches, order_sampler,
                               set_loader_epoch, window_plan)
from overt.engine.device import batch_size_of, move_to_device
from overt.engine.evaluate import evaluate
from overt.engine.gradnorms import GradNorms
from overt.engine.explain import backward_error, batch_error, loss_error, note_out_of_memory
from overt.engine.metrics import RunningLoss
from overt.engine.memory import apply_activation_checkpointing
from overt.engine.model_summary import model_summary
from overt.engine.parallel import Parallel
from overt.engine.precision import Precision
from overt.engine.seeding import capture_rng, restore_rng, seed_everything
from overt.engine.state import TrainState
from overt.errors import ConfigError, OvertError


def default_forward(model: nn.Module, batch: Any) -> tuple[Any, Any]:
    """``(inputs, target) -> (model(inputs), target)``."""
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        inputs, target = batch
        return model(inputs), target
    raise OvertError(
        f"cannot split a batch of type {type(batch).__name__} into (inputs, target)",
        why="the default forward expects each batch to be a pair (inputs, target)",
        fix="make the dataset return (inputs, target) pairs, or pass forward=lambda model, batch: (output, target)",
    )


def make_config(config: TrainConfig | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """``config`` (default: ``TrainConfig()``) with keyword ``overrides`` applied and validated."""
    cfg = config if config is not None else TrainConfig()
    if not overrides:
        return cfg
    from overt.config import resolve

    return resolve({k: v for k, v in cfg.model_dump().items() if k not in TrainConfig.model_fields},
                   {**cfg.model_dump(), **overrides}, source="Trainer(...) arguments")


def check_scheduler_interval(scheduler: Any, interval: str | None, *, given_by: str = "",
                             error: type[OvertError] = ConfigError) -> None:
    """A scheduler needs ``scheduler_interval`` (``"step"`` or ``"epoch"``): raise ``error`` (naming
    ``given_by``, e.g. the recipe) when one comes without it."""
    if scheduler is not None and interval not in ("step", "epoch"):
        raise error(
            f"{given_by} gives a scheduler but no scheduler_interval" if given_by else
            "a scheduler was given without scheduler_interval",
            why="stepping an epoch-based scheduler every batch (or the reverse) silently wrecks the schedule",
            fix='set scheduler_interval="step" (e.g. OneCycleLR) or "epoch" (e.g. StepLR, CosineAnnealingLR)'
                + (" in the Recipe" if given_by else ""),
        )


def one_process() -> Parallel:
    """The :class:`Parallel` of a Trainer given none: one process.  Under torchrun with several
    processes that would silently train every rank alone, so it is refused."""
    from overt.torchrun import Topology

    here = Topology.of_process()
    if here.distributed:
        raise ConfigError(f"this is rank {here.rank} of {here.world_size} (torchrun), but the engine's Trainer "
                          "was given no parallel strategy",
                          why="each process would train its own model on all the data, silently",
                          fix="use overt.Trainer (it picks DDP or FSDP2 from strategy=), or pass "
                              "parallel=overt.distributed.parallel.parallel_for(config)")
    return Parallel()


class _EpochLogs:
    """The unfinished epoch's running loss and the last epoch's metrics, as one stateful part."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        return {"running_loss": self.trainer.running_loss.state_dict(), "last_metrics": self.trainer.last_metrics,
                "wall_time_s": self.trainer.wall_time()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.trainer.running_loss.load_state_dict(state["running_loss"])  # it moves its tensors to its device
        self.trainer.last_metrics = dict(state["last_metrics"])
        earlier = state.get("wall_time_s", 0.0)  # (checkpoints of older versions do not have it)
        self.trainer.earlier_wall_time_s = float(earlier) if isinstance(earlier, (int, float)) else 0.0


class Trainer:
    """Trains ``model`` with ``optimizer`` on ``loss_fn(model(x), y)``, calling exactly ``callbacks``.

    ``train_data``/``val_data`` are Datasets (the trainer builds seeded,
    resumable loaders from ``config.batch_size``) or ready DataLoaders.
    ``config`` is a :class:`~overt.config.TrainConfig`; keyword overrides
    (``epochs=3``, ``precision="bf16"``...) are applied on top of it.
    This engine Trainer writes nothing and adds no callbacks of its own; ``overt.Trainer``
    (:class:`overt.compose.Trainer`) adds the defaults (guards, checkpoints, run directory,
    progress).  What a run saves and restores is :meth:`state_dict`/:meth:`load_state_dict`
    (by part: :meth:`state_objects`).  ``parallel`` (:class:`~overt.engine.parallel.Parallel`) says how
    the run is spread over processes; the default is one process (``overt.Trainer`` picks DDP or
    FSDP2 under torchrun).  Example::

        trainer = Trainer(model, optimizer, nn.CrossEntropyLoss(), train_ds, val_ds, epochs=5)
        summary = trainer.fit()
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[Any, Any], torch.Tensor],
        train_data: Any,
        val_data: Any = None,
        *,
        scheduler: Any = None,
        scheduler_interval: Literal["step", "epoch"] | None = None,
        metrics: dict[str, Callable[[Any, Any], torch.Tensor]] | None = None,
        forward: Callable[[nn.Module, Any], tuple[Any, Any]] | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        train_transform: Callable[[Any, torch.Generator], Any] | None = None,
        config: TrainConfig | None = None,
        callbacks: list[Callback] | None = None,
        parallel: Parallel | None = None,
        **overrides: Any,
    ):
        cfg = make_config(config, overrides)
        self.config = cfg
        seed_everything(cfg.seed)
        self.parallel = parallel if parallel is not None else one_process()
        self.device = self.parallel.device(cfg.device)  # under torchrun: the process group, cuda:LOCAL_RANK
        self.model = model.to(self.device)
        self.model_info = model_summary(self.model)  # parameters, size, device, dtype, top-level layers
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.metrics = dict(metrics or {})
        self.forward = forward or default_forward
        self.precision = Precision(cfg.precision, self.device)
        self.state = TrainState()
        self.should_stop = False  # set by a callback (e.g. on SIGTERM) to end at the next step boundary
        self.resumed_from: str | None = None  # where the loaded state came from (see load_state_dict)
        self._rng_at_fit: dict[str, Any] | None = None  # RNG state to put back right before training resumes

        pin = self.device.type == "cuda"
        if train_transform is not None:
            train_data = augmented(train_data, train_transform, cfg.seed)
        self.train_loader = self._loader(train_data, cfg.batch_size, True, pin, collate_fn)
        self.val_loader = (None if val_data is None else
                           self._loader(val_data, cfg.val_batch_size or 2 * cfg.batch_size, False, pin, collate_fn))
        check_not_empty(self.train_loader, "training")
        check_not_empty(self.val_loader, "validation")
        sizes = batch_sizes(self.train_loader)
        n_batches = num_batches(self.train_loader)
        self.plan: WindowPlan | None = (window_plan(self.train_loader, cfg.accumulate) if sizes is not None else
                                        WindowPlan.by_count(n_batches, cfg.accumulate) if n_batches else None)
        self.steps_per_epoch = None if n_batches is None else math.ceil(n_batches / cfg.accumulate)
        self.total_steps = None if self.steps_per_epoch is None else self.steps_per_epoch * cfg.epochs

        self.scheduler, self.scheduler_interval = self._scheduler(scheduler, scheduler_interval)
        if cfg.activation_checkpointing:
            apply_activation_checkpointing(self.model, cfg.activation_checkpointing)
        # ddp: the forward runs through the DDP wrapper, self.model stays the user's module;
        # fsdp: self.model is sharded in place and the optimizer re-pointed at the shards
        wrapped = self.parallel.wrap(self.model, optimizer, device=self.device, precision=self.precision.mode,
                                     accumulate=cfg.accumulate, config=cfg)
        self._fwd_model: nn.Module = torch.compile(wrapped) if cfg.compile else wrapped  # type: ignore[assignment]
        self._params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        self.grad_norms = GradNorms(self.model, self._params, clip=cfg.clip_grad_norm, per_layer=cfg.log_grad_norms)
        self._reduce = self.parallel.sum_reduce  # global losses and metrics (None: one process)

        self.callbacks = CallbackList(list(callbacks or []))
        self.last_metrics: dict[str, float] = {}
        self.earlier_wall_time_s = 0.0  # training time of the processes before a resume (from the checkpoint)
        self._start_time = time.perf_counter()
        self.running_loss = RunningLoss(self.device, self._reduce)  # on the device, read every log_every steps
        self.last_loss: torch.Tensor | None = None  # the latest micro-batch's loss (detached, on the device)
        self._window_samples = 0
        self._grad_norm: torch.Tensor | None = None

    @property
    def rank(self) -> int:
        """This process's rank (0 in a single-process run); see :attr:`parallel`."""
        return self.parallel.rank

    @property
    def world_size(self) -> int:
        """The number of processes training this run (1 in a single-process run)."""
        return self.parallel.world_size

    @property
    def strategy(self) -> str:
        """``none``, ``ddp`` or ``fsdp``: how the processes share the model."""
        return self.parallel.strategy

    # -- the loop ----------------------------------------------------------------------

    def fit(self) -> dict[str, Any]:
        """Train for ``config.epochs`` epochs (from wherever ``state`` says) and return the summary.
        ``config.threads``: torch's intra-op threads during the run (restored after it)."""
        threads, before = self.config.threads, torch.get_num_threads()
        if threads is not None and threads != before:
            torch.set_num_threads(threads)
        try:
            return self._fit()
        finally:
            if threads is not None and threads != before:
                torch.set_num_threads(before)

    def _fit(self) -> dict[str, Any]:
        cfg, state = self.config, self.state
        self._start_time = self._log_time = time.perf_counter()
        try:
            self.callbacks.call("on_fit_start", self)  # (a failing start is a failed run: on_exception too)
            if self._rng_at_fit is not None:  # a resumed run draws the same random numbers as the original
                restore_rng(self._rng_at_fit)
                self._rng_at_fit = None
            while state.epoch < cfg.epochs and not self.should_stop:
                self.callbacks.call("on_epoch_start", self, state.epoch)
                self.train_epoch()
                if self.should_stop and state.batch_index:  # preempted mid-epoch: resume picks it up
                    break
                metrics = self._epoch_train_metrics()
                if self.val_loader is not None and ((state.epoch + 1) % cfg.val_every == 0
                                                    or state.epoch + 1 == cfg.epochs):
                    metrics.update(self.validate())
                self._track_best(metrics)
                if self.scheduler_interval == "epoch":
                    self._scheduler_step(metrics)
                state.epoch, state.batch_index, state.samples_seen = state.epoch + 1, 0, 0
                self.last_metrics = metrics
                self.callbacks.call("on_epoch_end", self, state.epoch - 1, metrics)
            self.parallel.finish(self.model)  # e.g. FSDP2: the whole weights gathered (every process takes part)
            summary = self.summary()
            self.callbacks.call("on_summary", self, summary)  # every plug-in adds its part first...
        except BaseException as error:  # (a final save that fails fails the run: on_exception too)
            self._on_exception(error)
            raise
        self.callbacks.call("on_fit_end", self, summary)  # ...then writers and printers see all of it
        return summary

    def _on_exception(self, error: BaseException) -> None:
        """Every callback's ``on_exception``, each one even when an earlier one fails: a callback
        that cannot record the error (a full disk) must not stop the others (the run directory's
        status) nor replace the error the run ends with; its own failure is printed."""
        for fn in self.callbacks.hook("on_exception"):
            try:
                fn(self, error)
            except Exception as inner:  # noqa: BLE001
                import sys

                print(f"overt: while handling {type(error).__name__}, {type(inner).__name__}: {inner}",
                      file=sys.stderr, flush=True)

    def train_epoch(self) -> None:
        """One pass over the training data (or its remainder, after a resume)."""
        state, model, device = self.state, self.model, self.device
        set_loader_epoch(self.train_loader, state.epoch, self.config.seed)
        if state.samples_seen:
            self._skip_consumed(state.samples_seen)
        on_batch_start = self.callbacks.hook("on_batch_start")
        non_blocking = device.type == "cuda"
        accumulate = self.config.accumulate
        grad_sync = self.parallel.grad_sync
        model.train()
        for batch in self.train_loader:
            i = state.batch_index
            for fn in on_batch_start:
                fn(self, batch, i)
            batch = move_to_device(batch, device, non_blocking)
            if self.plan is not None:
                weight, closes = self.plan.weights[i], self.plan.closes[i]
            else:  # unsized loader: weight by the window length; the last partial window is fixed below
                weight, closes = 1.0 / accumulate, (i + 1) % accumulate == 0
            with grad_sync(closes):  # several processes: gradients synchronised at a window's end only
                self.micro_step(batch, weight)
            state.batch_index += 1
            if closes:
                self.optimizer_step()
                if self.should_stop:
                    return
        if self._window_samples:  # unsized loader ended inside a window: renormalise to its real length
            pending = state.batch_index % accumulate
            self._rescale_grads(accumulate / pending)
            self.optimizer_step()

    def micro_step(self, batch: Any, weight: float) -> torch.Tensor:
        """Forward, loss and backward for one micro-batch; gradients accumulate in ``.grad``."""
        try:
            with self.precision.autocast():
                output, target = self.forward(self._fwd_model, batch)
                loss = self.loss_fn(output, target)
        except OvertError:
            raise
        except torch.cuda.OutOfMemoryError as exc:  # raised as itself, so callers catch the type they know
            note_out_of_memory(exc, batch, self.state)
            raise
        except (RuntimeError, IndexError, ValueError, TypeError) as exc:
            raise batch_error(exc, batch, self.state) from exc
        try:
            self.precision.backward(loss if weight == 1.0 else loss * weight)
        except (RuntimeError, AttributeError, TypeError) as exc:
            error = loss_error(loss, self.state) or backward_error(exc, self.model, self.state)
            if error is None:
                raise
            raise error from exc
        for fn in self.callbacks.hook("on_after_backward"):
            fn(self, loss)
        n = target.shape[0] if isinstance(target, torch.Tensor) and target.dim() else batch_size_of(batch)
        self.last_loss = loss.detach()
        self.running_loss.add(self.last_loss, n)
        self.state.samples_seen += n
        self._window_samples += n
        return loss

    def optimizer_step(self) -> None:
        """Close an accumulation window: unscale, check, clip, step, reset gradients, schedule."""
        cfg, state, optimizer = self.config, self.state, self.optimizer
        self.precision.unscale(optimizer)
        for fn in self.callbacks.hook("on_before_optimizer_step"):
            fn(self)
        logged = (state.global_step + 1) % cfg.log_every == 0
        self._grad_norm = self.grad_norms.measure(logged)  # clips when clip_grad_norm is set
        self.precision.step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        state.global_step += 1
        if self.scheduler_interval == "step":
            self.scheduler.step()
        samples, self._window_samples = self._window_samples, 0
        if logged:
            self._log()
        step_end = self.callbacks.hook("on_step_end")
        if step_end:
            epoch_end = self.plan is not None and state.batch_index >= len(self.plan)
            logs = {"loss": self.last_loss, "samples": samples, "grad_norm": self._grad_norm, "epoch_end": epoch_end}
            for fn in step_end:
                fn(self, logs)

    def validate(self) -> dict[str, float]:
        """Validation metrics under ``eval()`` and ``inference_mode``; modes restored after."""
        metrics = evaluate(self._fwd_model, self.val_loader, loss_fn=self.loss_fn, forward=self.forward, metrics=self.metrics,
                           device=self.device, autocast=self.precision.autocast, reduce=self._reduce)
        self.callbacks.call("on_validation_end", self, metrics)
        return metrics

    # -- what a run saves and restores --------------------------------------------------

    def state_objects(self) -> dict[str, Any]:
        """The Trainer's stateful parts by name, each with ``state_dict``/``load_state_dict``:
        ``model``, ``optimizer``, ``scheduler`` (when there is one), ``precision`` (GradScaler and
        skipped-step count), ``train_state`` (epoch, step, position in the epoch: the sampler
        skips the consumed samples, best metric) and ``loop`` (the unfinished epoch's running
        loss and the last metrics).  Checkpoints save exactly these, plus the RNG states."""
        parts: dict[str, Any] = {"model": self.model, "optimizer": self.optimizer}
        if self.scheduler is not None:
            parts["scheduler"] = self.scheduler
        parts.update(precision=self.precision, train_state=self.state, loop=_EpochLogs(self))
        return parts

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue this run exactly: each part's state and ``rng``."""
        state = {name: part.state_dict() for name, part in self.state_objects().items()}
        state["rng"] = capture_rng()
        return state

    def load_state_dict(self, state: dict[str, Any], *, source: str | None = None) -> list[str]:
        """Load a :meth:`state_dict` (``source``: where it came from, kept in ``resumed_from``).
        Returns notes on RNG states this machine cannot restore."""
        parts = self.state_objects()
        if set(parts) != set(state) - {"rng"}:
            raise OvertError(f"the state holds {', '.join(sorted(set(state) - {'rng'}))}; "
                             f"this Trainer has {', '.join(sorted(parts))}",
                             why="a run continues exactly only with the same parts (e.g. the same scheduler)",
                             fix="build the Trainer the same way as the one whose state this is")
        for name, part in parts.items():
            part.load_state_dict(state[name])
        self.resumed_from = source
        return self.load_rng_state(state["rng"]) if state.get("rng") is not None else []

    def load_rng_state(self, rng: dict[str, Any]) -> list[str]:
        """Restore the RNG states now and again when ``fit`` starts (anything may draw in between)."""
        self._rng_at_fit = rng
        return restore_rng(rng)

    # -- pieces ---------------------------------------------------------------------------

    def wall_time(self) -> float:
        """Seconds of training of this run: this process's ``fit`` so far plus, after a resume, the
        time of the processes before it (saved in each checkpoint)."""
        return self.earlier_wall_time_s + time.perf_counter() - self._start_time

    def summary(self) -> dict[str, Any]:
        """What the run did: final and best metrics, steps, epochs, time, versions."""
        from overt import __version__

        state = self.state
        return {
            "status": "stopped" if self.should_stop else "completed",
            "epochs": state.epoch,
            "steps": state.global_step,
            "wall_time_s": round(self.wall_time(), 3),  # every process of the run: resumes add up
            **({"wall_time_since_resume_s": round(time.perf_counter() - self._start_time, 3)}
               if self.resumed_from is not None else {}),
            "final": dict(self.last_metrics),
            "best": {"metric": self.config.monitor, "mode": self.config.monitor_mode,
                     "value": state.best_metric, "step": state.best_step},
            "device": str(self.device),
            "world_size": self.world_size,
            "strategy": self.strategy,
            "precision": self.precision.mode,
            "model": self.model_info,
            "skipped_steps": self.precision.skipped_steps,
            "versions": {"python": platform.python_version(), "torch": torch.__version__, "overt": __version__},
        }

    def _log(self) -> None:
        """One host read for the interval: mean loss, lr, throughput -> ``on_log``."""
        now = time.perf_counter()
        loss = self.running_loss.read_interval()  # over every process's samples in a multi-process run
        logs: dict[str, float] = {
            "step": self.state.global_step,
            "epoch": self.state.epoch + 1,  # the epoch in progress, counted from 1 as the console counts
            "train/loss": loss,
            "train/lr": float(self.optimizer.param_groups[0]["lr"]),
            "train/samples_per_sec": self.running_loss.last_samples / max(now - self._log_time, 1e-9),
        }
        logs.update(self.grad_norms.read())
        self._log_time = now
        self.callbacks.call("on_log", self, logs)

    def _epoch_train_metrics(self) -> dict[str, float]:
        mean = self.running_loss.read_epoch()
        return {} if mean is None else {"train/epoch_loss": mean}

    def _track_best(self, metrics: dict[str, float]) -> None:
        cfg, state = self.config, self.state
        if cfg.monitor not in metrics:
            if any(k.startswith("val/") for k in metrics) or cfg.monitor.startswith("train/"):
                raise ConfigError(f"monitor={cfg.monitor!r} is not among the metrics this run produces",
                                  where=f"epoch {state.epoch}",
                                  why="the best model and best-K checkpoints would be chosen by nothing",
                                  fix=f"set monitor to one of: {', '.join(sorted(metrics))}")
            return
        value = metrics[cfg.monitor]
        best = state.best_metric
        if best is None or (value < best if cfg.monitor_mode == "min" else value > best):
            state.best_metric, state.best_step = value, state.global_step

    def _scheduler_step(self, metrics: dict[str, float]) -> None:
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            if self.config.monitor in metrics:
                self.scheduler.step(metrics[self.config.monitor])
        else:
            self.scheduler.step()

    def _loader(self, data: Any, batch_size: int, train: bool, pin: bool, collate_fn: Any) -> Any:
        """A seeded, resumable loader over a Dataset: shuffled and with ``drop_last`` for training,
        in order and complete for validation."""
        if is_ready_loader(data):
            return data  # a ready loader (or any iterable of batches): used as given
        return self.parallel.loader(data, batch_size=batch_size, train=train, config=self.config, pin_memory=pin,
                                    collate_fn=collate_fn, tag_epoch=isinstance(data, Augmented))

    def _scheduler(self, scheduler: Any, interval: str | None) -> tuple[Any, str | None]:
        if scheduler is None:
            return None, None
        check_scheduler_interval(scheduler, interval)
        if not hasattr(scheduler, "step"):  # a factory: f(optimizer, total_steps)
            if self.total_steps is None:
                raise ConfigError("a scheduler factory needs the number of steps, but the training loader has no length",
                                  fix="pass a ready scheduler instead of a factory")
            horizon = self.total_steps if interval == "step" else self.config.epochs
            scheduler = scheduler(self.optimizer, horizon)
        return scheduler, interval

    def _skip_consumed(self, samples: int) -> None:
        sampler = order_sampler(self.train_loader)
        if not hasattr(sampler, "skip"):
            raise OvertError("cannot resume mid-epoch: the training loader's sampler cannot skip consumed samples",
                             fix="pass a Dataset (overt builds a resumable loader) or resume at an epoch boundary")
        sampler.skip(samples)

    @torch.no_grad()
    def _rescale_grads(self, factor: float) -> None:
        for p in self._params:
            if p.grad is not None:
                p.grad.mul_(factor)
