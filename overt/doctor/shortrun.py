"""Short runs of overt's own Trainer on copies of the user's objects: every probe that trains does
it here, so it trains the way ``overt train`` would with the same config (precision, gradient
accumulation, clipping, forward, loss and collate function).

What a probe does differently (stop after N steps, train on one fixed batch, sweep the learning
rate, time the steps, train in eval mode) comes from :class:`~overt.engine.callbacks.Callback`\\ s
and from the data it hands the Trainer (:class:`Batches`), never from a loop of its own."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from overt.config import TrainConfig
from overt.doctor.common import device_of, fresh
from overt.engine.callbacks import Callback

#: the engine Trainer runs only the callbacks it is given (nothing is written or printed); the short
#: runs need no log points either
QUIET = {"log_every": 10**9}


@dataclass
class Objects:
    """What a short run trains: the user's objects and how the recipe wires them."""

    model: Any
    optimizer: Any
    loss_fn: Any
    train_data: Any
    scheduler: Any = None
    scheduler_interval: str | None = None
    forward: Any = None
    collate_fn: Any = None
    config: TrainConfig = field(default_factory=TrainConfig)


class Batches:
    """Ready batches handed to the Trainer as its loader: iterated as given, one micro-batch each,
    never re-batched (a plain list would be taken for a Dataset of samples)."""

    def __init__(self, items: list[Any]):
        self.items = list(items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def as_loader(data: Any) -> Any:
    """``data`` for the Trainer: a list or tuple of batches as :class:`Batches`; anything else (a
    Dataset, a DataLoader, an iterable of batches) as given."""
    return Batches(list(data)) if isinstance(data, (list, tuple)) else data


class StopAt(Callback):
    """Records every step's loss; stops the run after optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = step
        self.losses: list[float] = []

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        self.losses.append(float(logs["loss"]))
        if trainer.state.global_step >= self.step:
            trainer.should_stop = True


class WindowLoss(Callback):
    """Every optimizer step's loss: the mean over the step's micro-batches (one host read per step,
    in the doctor's callback, not in the engine).  Subclasses act on it in :meth:`on_loss`."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self._window: list[torch.Tensor] = []

    def on_after_backward(self, trainer: Any, loss: Any) -> None:
        self._window.append(loss.detach())

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        window, self._window = self._window, []
        value = float(torch.stack(window).float().mean()) if window else float(logs["loss"])
        self.losses.append(value)
        if not math.isfinite(value):
            trainer.should_stop = True
        self.on_loss(trainer, value)

    def on_loss(self, trainer: Any, value: float) -> None:
        """Called after each step with its loss."""


class EvalMode(Callback):
    """Trains with the model in eval mode (dropout off), for runs compared across devices whose
    random masks differ."""

    def on_batch_start(self, trainer: Any, batch: Any, batch_index: int) -> None:
        trainer.model.eval()


def quiet_config(config: TrainConfig, **changes: Any) -> TrainConfig:
    """``config`` with the doctor's quiet settings (and ``changes``) applied."""
    return config.model_copy(update={**QUIET, **changes})


def probe_config(config: TrainConfig | None, model: Any, device: Any = None) -> TrainConfig:
    """The config a probe called on its own trains with: ``config`` (default: overt's defaults),
    on ``device`` when given, else, without a config, where the model's parameters are."""
    cfg = config if config is not None else TrainConfig()
    if device is not None or config is None:
        cfg = cfg.model_copy(update={"device": str(device_of(model, device))})
    return cfg


def trainer_for(objs: Objects, stop_at: int, *, data: Any = None, callbacks: list[Callback] | None = None,
                scheduler: bool = True, **changes: Any) -> tuple[Any, StopAt]:
    """A Trainer on fresh copies of ``objs`` that stops after optimizer step ``stop_at``.

    ``data`` replaces the training data (e.g. :class:`Batches` of one fixed batch); ``callbacks``
    run after the stop; ``scheduler=False`` trains without the scheduler; ``changes`` are config
    keys (``epochs``, ``device``, ``precision``)."""
    from overt.engine.loop import Trainer

    with_scheduler = scheduler and objs.scheduler is not None
    model, optimizer, sched = fresh(objs.model, objs.optimizer,
                                    objs.scheduler if with_scheduler and hasattr(objs.scheduler, "step") else None)
    if with_scheduler and not hasattr(objs.scheduler, "step"):
        sched = objs.scheduler  # a factory f(optimizer, total_steps): the Trainer builds it
    stop = StopAt(stop_at)
    trainer = Trainer(model, optimizer, objs.loss_fn, objs.train_data if data is None else data, None,
                      scheduler=sched, scheduler_interval=objs.scheduler_interval if sched is not None else None,
                      forward=objs.forward, collate_fn=objs.collate_fn,
                      config=quiet_config(objs.config, **changes), callbacks=[stop, *(callbacks or [])])
    return trainer, stop


def fixed_batches(batch: Any, steps: int, config: TrainConfig) -> Batches:
    """``batch`` as every micro-batch of ``steps`` optimizer steps (``accumulate`` micro-batches each)."""
    return Batches([batch] * (steps * config.accumulate))


def epochs_for(data: Any, steps: int, config: TrainConfig) -> int:
    """Enough epochs over ``data`` for ``steps`` optimizer steps (the run stops at the step)."""
    from torch.utils.data import DataLoader

    try:
        ready = isinstance(data, (DataLoader, Batches)) or not hasattr(data, "__getitem__")
        n = len(data) if ready else len(data) // config.batch_size
    except TypeError:
        return 10**6  # an unsized iterable: the stop decides
    per_epoch = max(1, math.ceil(n / config.accumulate))
    return math.ceil(steps / per_epoch) + 1


def trained_as(trainer: Any) -> dict[str, Any]:
    """How a short run trained (the evidence that it followed the config)."""
    cfg = trainer.config
    return {"precision": trainer.precision.mode, "accumulate": cfg.accumulate, "clip_grad_norm": cfg.clip_grad_norm}


def as_configured(trainer: Any) -> str:
    """A line saying how the run trained, when it is not plain fp32 steps ('' otherwise)."""
    how = trained_as(trainer)
    parts = ([f"{how['precision']} autocast"] if how["precision"] != "fp32" else []) + (
        [f"{how['accumulate']} micro-batches per optimizer step"] if how["accumulate"] > 1 else []) + (
        [f"gradients clipped to norm {how['clip_grad_norm']:g}"] if how["clip_grad_norm"] else [])
    return f"trained as the run is configured: {', '.join(parts)}" if parts else ""


@contextlib.contextmanager
def kept_rng() -> Iterator[None]:
    """The global random generators as they were, after a short run (the Trainer seeds them)."""
    from overt.engine.seeding import capture_rng, restore_rng

    state = capture_rng()
    try:
        yield
    finally:
        restore_rng(state)


@contextlib.contextmanager
def deterministic_kernels() -> Iterator[None]:
    """``torch.use_deterministic_algorithms(True)`` for the block (with ``CUBLAS_WORKSPACE_CONFIG``
    set when it is unset, as cuBLAS needs on CUDA), both restored after."""
    import os

    was, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    env = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if env is None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
        if env is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


@dataclass
class KernelNoise:
    """What repeating a comparison under deterministic kernels showed: ``identical`` (the difference
    came from kernels that add in a varying order), or the operation that has no deterministic
    implementation (``op``)."""

    identical: bool
    op: str | None = None

    def text(self) -> str:
        if self.identical:
            return ("identical with torch.use_deterministic_algorithms(True): the difference comes from "
                    "non-deterministic kernels (atomic adds in a varying order), not from an unseeded random source")
        return f"with torch.use_deterministic_algorithms(True): {self.op}"


def kernel_noise(same_again: Any) -> KernelNoise | None:
    """Repeat a comparison that found a difference (``same_again()`` -> bool) under deterministic
    kernels; None when the difference remains (the cause is elsewhere)."""
    try:
        with deterministic_kernels(), kept_rng():
            same = bool(same_again())
    except RuntimeError as exc:  # an operation without a deterministic implementation names itself
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return KernelNoise(False, first[:300])
    return KernelNoise(True) if same else None


def blame_kernels(r: Any, same_again: Any, *, exact: str, fix: str) -> bool:
    """A probe that found two runs differ: repeat the comparison under deterministic kernels
    (:func:`kernel_noise`) and record what that showed on the result ``r``.  True (``r`` is then a
    WARN naming the kernels, with ``fix``) when the difference disappears; else ``r`` carries the
    operation named, if any, and the caller judges the remaining difference."""
    from overt.doctor.result import Verdict

    noise = kernel_noise(same_again)
    if noise is None:
        return False
    r.evidence["deterministic_kernels"] = {"identical": noise.identical, "op": noise.op}
    r.lines.append(noise.text())
    if not noise.identical:
        r.summary += f"; {noise.op}"
        return False
    r.verdict = Verdict.WARN
    r.summary += f": non-deterministic kernels ({exact} with deterministic algorithms)"
    r.causes.append("kernels that add in a varying order on the accelerator (embedding and index backward, "
                    "scatter_add, attention backward, some convolutions)")
    r.fix = ("call torch.use_deterministic_algorithms(True) and set CUBLAS_WORKSPACE_CONFIG=:4096:8 before "
             f"training (slower); {fix}")
    return True


def run(objs: Objects, steps: int, **changes: Any) -> tuple[list[float], dict[str, torch.Tensor], Any]:
    """Train fresh copies for ``steps`` optimizer steps: (losses per step, final weights on the CPU, trainer)."""
    trainer, stop = trainer_for(objs, steps, **changes)
    trainer.fit()
    return stop.losses, weights(trainer.model), trainer


def weights(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def first_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> tuple[str, float] | None:
    """The first tensor that differs between two state dicts and its max |diff| (None if bitwise equal)."""
    for key in a:
        x, y = a[key], b.get(key)
        if y is None or x.shape != y.shape:
            return key, float("inf")
        if not torch.equal(x, y):
            return key, float((x.double() - y.double()).abs().max()) if x.is_floating_point() else float("inf")
    return None
