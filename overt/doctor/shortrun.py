"""A few optimizer steps of overt's own Trainer on copies of the user's objects: the runs the
exact-resume, determinism and parity probes compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from overt.config import TrainConfig
from overt.doctor.common import fresh
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


class StopAt(Callback):
    """Records every step's loss; stops the run after optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = step
        self.losses: list[float] = []

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        self.losses.append(float(logs["loss"]))
        if trainer.state.global_step >= self.step:
            trainer.should_stop = True


def quiet_config(config: TrainConfig, **changes: Any) -> TrainConfig:
    """``config`` with the doctor's quiet settings (and ``changes``) applied."""
    return config.model_copy(update={**QUIET, **changes})


def trainer_for(objs: Objects, stop_at: int, **changes: Any) -> tuple[Any, StopAt]:
    """A Trainer on fresh copies of ``objs`` that stops after optimizer step ``stop_at``."""
    from overt.engine.loop import Trainer

    model, optimizer, scheduler = fresh(objs.model, objs.optimizer,
                                        objs.scheduler if hasattr(objs.scheduler, "step") else None)
    if objs.scheduler is not None and not hasattr(objs.scheduler, "step"):
        scheduler = objs.scheduler  # a factory f(optimizer, total_steps): the Trainer builds it
    stop = StopAt(stop_at)
    trainer = Trainer(model, optimizer, objs.loss_fn, objs.train_data, None, scheduler=scheduler,
                      scheduler_interval=objs.scheduler_interval if scheduler is not None else None,
                      forward=objs.forward, collate_fn=objs.collate_fn,
                      config=quiet_config(objs.config, **changes), callbacks=[stop])
    return trainer, stop


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
