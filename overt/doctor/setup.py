"""What every probe runs on: the user's objects, the run's config and the doctor's settings
(:class:`Setup`), and the doctor's own settings (:class:`DoctorSettings`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from overt.config import TrainConfig


@dataclass
class DoctorSettings:
    """The doctor's settings: ``probe_settings`` holds those given, each declared (with its default)
    by the probe it configures (:attr:`Probe.settings <overt.doctor.registry.Probe.settings>`:
    ``overfit_steps`` by the overfit probe, ``lr_find`` by the learning-rate range test...); engine
    settings (seed, batch_size, device...) come from the config."""

    probe_settings: dict[str, Any] = field(default_factory=dict)


class Setup:
    """The user's objects plus the config and settings, as the probes see them.

    ``objs`` (:class:`~overt.doctor.shortrun.Objects`) is what a probe that trains hands to overt's
    Trainer (:mod:`overt.doctor.shortrun`); ``cfg`` is the run's config (precision, accumulation,
    clipping, batch size, seed...), ``opts`` the doctor's settings; :meth:`batches` and
    :meth:`val_batches` are the first batches of the engine's seeded loaders."""

    def __init__(self, model: nn.Module, optimizer: Any, loss_fn: Any, train_data: Any, val_data: Any, scheduler: Any,
                 scheduler_interval: Any, forward: Any, collate_fn: Any, build: Any, validate: Any,
                 cfg: TrainConfig, opts: DoctorSettings):
        from overt.doctor.common import default_forward
        from overt.doctor.shortrun import Objects
        from overt.engine.device import pick_device

        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.train_data, self.val_data = train_data, val_data
        self.scheduler, self.scheduler_interval = scheduler, scheduler_interval
        self.forward = forward or default_forward
        self.collate_fn, self.build, self.validate = collate_fn, build, validate
        self.cfg, self.opts = cfg, opts
        self.device = pick_device(cfg.device)
        self.objs = Objects(model, optimizer, loss_fn, train_data, scheduler, scheduler_interval, forward, collate_fn,
                            cfg)
        self._batches: list[Any] | None = None

    def setting(self, name: str) -> Any:
        """A doctor setting, as given, else the default its probe declares."""
        from overt.doctor import registry

        if name in self.opts.probe_settings:
            return self.opts.probe_settings[name]
        return registry.settings()[name]

    def train_loader(self, **kw: Any) -> Any:
        from overt.doctor.common import loader_for

        return loader_for(self.train_data, self.cfg.batch_size, shuffle=True, seed=self.cfg.seed,
                          collate_fn=self.collate_fn, **kw)

    def batches(self, n: int = 4) -> list[Any]:
        """The first ``n`` training batches (the engine's seeded loader), kept for every probe."""
        from overt.doctor.common import take

        if self._batches is None or len(self._batches) < n:
            self._batches = take(self.train_loader(), n)
        return self._batches[:n]

    def val_batches(self, n: int = 4) -> list[Any]:
        """The first ``n`` validation batches (training batches when there is no validation data)."""
        from overt.doctor.common import loader_for, take

        if self.val_data is None:
            return self.batches(n)
        bs = self.cfg.val_batch_size or 2 * self.cfg.batch_size
        return take(loader_for(self.val_data, bs, shuffle=False, seed=self.cfg.seed, collate_fn=self.collate_fn), n)

    def describe(self, name: str | None) -> dict[str, Any]:
        """The setup, for the note's first table."""
        from overt.doctor.common import describe_loss, describe_module, describe_optimizer
        from overt.engine.precision import resolve_precision

        def size(data: Any) -> int | None:
            try:
                return len(data.dataset) if hasattr(data, "dataset") else len(data)
            except TypeError:
                return None

        cfg = self.cfg
        sched = None
        if self.scheduler is not None:
            sched = (type(self.scheduler).__name__ if hasattr(self.scheduler, "step") else "a scheduler factory")
            sched += f", stepped per {self.scheduler_interval}"
        return {
            "name": name or cfg.recipe,
            "model": describe_module(self.model) if "_modules" in vars(self.model) else type(self.model).__name__,
            "loss": describe_loss(self.loss_fn),
            "optimizer": describe_optimizer(self.optimizer),
            "scheduler": sched,
            "device": str(self.device),
            "precision": resolve_precision(cfg.precision, self.device),
            "train_samples": size(self.train_data),
            "val_samples": None if self.val_data is None else size(self.val_data),
            "batch_size": cfg.batch_size,
            "accumulate": cfg.accumulate,
            "seed": cfg.seed,
            "num_workers": cfg.num_workers,
            "validation": "your validate() function" if self.validate is not None else
                          "overt's evaluation: model.eval() + torch.inference_mode(), modes restored after",
        }
