"""``overt.doctor(...)``: run the readiness probes on a training setup and return a
:class:`~overt.doctor.readiness.Readiness`.

The probes work on copies: the model's weights, the optimizer's state and every global random
generator are the same before and after."""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, TextIO

from torch import nn

from overt.config import TrainConfig
from overt.doctor.result import ProbeResult, Verdict, skipped
from overt.errors import ConfigError


@dataclass
class DoctorSettings:
    """How much each probe does (engine settings -- seed, batch_size, device... -- come from the config)."""

    overfit_samples: int = 16
    overfit_steps: int = 300
    overfit_time_s: float = 10.0
    resume_steps: int = 3
    determinism_steps: int = 5
    parity_steps: int = 5
    throughput_steps: int = 50
    throughput_time_s: float = 5.0
    lr_find: bool = False
    lr_find_steps: int = 100
    bench: bool = False


DOCTOR_KEYS = frozenset(f.name for f in fields(DoctorSettings))

#: probe ids in the order they run; ``lr-find`` and ``bench`` only when asked for
ORDER = ("data", "initial-loss", "optimizer", "gradients", "overfit-batch", "validation", "checkpoint",
         "determinism", "parity", "throughput", "lr-find", "bench")


def split_settings(settings: dict[str, Any], config: TrainConfig | None = None) -> tuple[TrainConfig, DoctorSettings]:
    """Engine keys go to a TrainConfig, the doctor's own to :class:`DoctorSettings`; anything else is an error."""
    from overt.config import resolve

    cfg = config if config is not None else TrainConfig()
    engine = {k: v for k, v in settings.items() if k in type(cfg).model_fields}
    own = {k: v for k, v in settings.items() if k in DOCTOR_KEYS}
    unknown = sorted(set(settings) - set(engine) - set(own))
    if unknown:
        import difflib

        valid = sorted(DOCTOR_KEYS | set(type(cfg).model_fields))
        close = difflib.get_close_matches(unknown[0], valid, n=3)
        raise ConfigError(f"unknown doctor setting {unknown[0]!r}",
                          why="a misspelt setting would otherwise be ignored",
                          fix=f"did you mean {' or '.join(close)}?" if close else f"valid settings: {', '.join(valid)}")
    if engine:
        cfg = resolve(cfg.recipe_params(), {**cfg.model_dump(), **engine}, source="doctor(...) settings")
    return cfg, DoctorSettings(**own)


class Progress:
    """One line per probe on ``stream`` as it finishes: number, name, verdict, time, summary."""

    def __init__(self, total: int, stream: TextIO | None):
        self.total, self.stream, self.index = total, stream, 0

    def line(self, r: ProbeResult) -> None:
        self.index += 1
        if self.stream is None:
            return
        summary = r.summary if len(r.summary) <= 110 else r.summary[:107] + "..."
        print(f"doctor [{self.index:>2}/{self.total}] {r.title:<38} {r.verdict.value.upper():<7} "
              f"{r.seconds:6.2f} s  {summary}", file=self.stream, flush=True)


def doctor(model: nn.Module, optimizer: Any, loss_fn: Any, train_data: Any, val_data: Any = None, *,
           scheduler: Any = None, scheduler_interval: str | None = None, forward: Any = None, collate_fn: Any = None,
           build: Callable[[], Any] | None = None, validate: Callable[[nn.Module, Any], Any] | None = None,
           config: TrainConfig | None = None, name: str | None = None, out: str | Path | None = None,
           progress: bool | TextIO = True, only: list[str] | None = None, **settings: Any) -> Any:
    """Run the readiness probes and return a :class:`~overt.doctor.readiness.Readiness`.

    ``settings`` are engine keys (``seed``, ``batch_size``, ``device``, ``precision``, ``num_workers``...)
    and the doctor's own (:class:`DoctorSettings`: ``overfit_steps``, ``lr_find=True``, ``bench=True``...).
    ``build()`` returns a freshly built model (or ``(model, optimizer)``) for the checkpoint probe;
    ``validate(model, data)`` is your own validation code, checked by the validation probe instead of
    the engine's.  With ``out`` the note, JSON and plots are written there.  Example::

        report = overt.doctor(model, optimizer, nn.CrossEntropyLoss(), train_ds, val_ds, batch_size=32)
        assert report.passed, report.to_markdown()
    """
    from overt.engine.seeding import capture_rng, restore_rng
    from overt.doctor.readiness import Readiness

    _check_inputs(model, train_data, out)
    cfg, opts = split_settings(settings, config)
    rng = capture_rng()
    generators = _loader_generators(train_data, val_data)  # iterating a user's DataLoader advances them
    try:
        setup = _Setup(model, optimizer, loss_fn, train_data, val_data, scheduler, scheduler_interval, forward,
                       collate_fn, build, validate, cfg, opts)
        wanted = [p for p in ORDER if (p != "lr-find" or opts.lr_find) and (p != "bench" or opts.bench)]
        if only:
            bad = [p for p in only if p not in ORDER]
            if bad:
                raise ConfigError(f"unknown probe {bad[0]!r}", fix=f"choose from: {', '.join(ORDER)}")
            wanted = [p for p in wanted if p in only]
        stream = sys.stderr if progress is True else (progress or None)
        bar = Progress(len(wanted), stream)  # type: ignore[arg-type]
        results = []
        for probe in wanted:
            result = setup.run(probe)
            results.append(result)
            bar.line(result)
        readiness = Readiness(results, setup.describe(name))
    finally:
        restore_rng(rng)
        for generator, state in generators:
            generator.set_state(state)
    if out is not None:
        readiness.write(out)
    return readiness


def _check_inputs(model: Any, train_data: Any, out: str | Path | None) -> None:
    """Refuse, before any probe runs, what no probe can use: a model that is not a module, an empty
    training set, an ``out`` that names a file."""
    if not isinstance(model, nn.Module):
        raise ConfigError(f"the model is {type(model).__name__}, not a torch.nn.Module",
                          why="every probe trains or runs a copy of the model",
                          fix="pass the model itself (an nn.Module) as the first argument")
    if train_data is None:
        raise ConfigError("the training data is None", fix="pass the training Dataset or DataLoader")
    try:
        size = len(train_data)
    except TypeError:  # an IterableDataset or a loader over one: checked when the probes iterate it
        size = None
    if size == 0:
        raise ConfigError("the training data is empty (0 samples)" if not hasattr(train_data, "dataset")
                          else "the training loader is empty (0 batches)",
                          why="there is nothing to probe: no batch to run, train or time",
                          fix="check how the training set is built (a wrong path or filter leaves it empty)")
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise ConfigError(f"out={out} is a file, not a folder",
                          why="the doctor writes its note, JSON and plots into the folder `out` names",
                          fix="name a folder (it is created when missing)")


def _loader_generators(*datas: Any) -> list[tuple[Any, Any]]:
    import torch

    found = []
    for data in datas:
        for owner in (data, getattr(data, "sampler", None)):
            generator = getattr(owner, "generator", None)
            if isinstance(generator, torch.Generator):
                found.append((generator, generator.get_state()))
    return found


class _Setup:
    """The user's objects plus the settings, and how each probe is called on them."""

    def __init__(self, model: nn.Module, optimizer: Any, loss_fn: Any, train_data: Any, val_data: Any, scheduler: Any,
                 scheduler_interval: Any, forward: Any, collate_fn: Any, build: Any, validate: Any,
                 cfg: TrainConfig, opts: DoctorSettings):
        from overt.doctor.common import default_forward, loader_for, take
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
        self._take, self._loader_for = take, loader_for
        self._batches: list[Any] | None = None
        self.blocked: str | None = None  # why the probes that need a forward pass cannot run
        self.loss_blocked: str | None = None  # why the probes that train cannot run

    def train_loader(self, **kw: Any) -> Any:
        return self._loader_for(self.train_data, self.cfg.batch_size, shuffle=True, seed=self.cfg.seed,
                                collate_fn=self.collate_fn, **kw)

    def batches(self, n: int = 4) -> list[Any]:
        if self._batches is None or len(self._batches) < n:
            self._batches = self._take(self.train_loader(), n)
        return self._batches[:n]

    def val_batches(self, n: int = 4) -> list[Any]:
        if self.val_data is None:
            return self.batches(n)
        bs = self.cfg.val_batch_size or 2 * self.cfg.batch_size
        return self._take(self._loader_for(self.val_data, bs, shuffle=False, seed=self.cfg.seed,
                                           collate_fn=self.collate_fn), n)

    def run(self, probe: str) -> ProbeResult:
        start = time.perf_counter()
        if self.blocked and probe not in ("data", "optimizer", "bench"):
            result = skipped(probe, _TITLES[probe], "", self.blocked)
        elif self.loss_blocked and probe in _TRAINING:
            result = skipped(probe, _TITLES[probe], "", self.loss_blocked)
        else:
            try:
                result = getattr(self, "_" + probe.replace("-", "_"))()
            except Exception as exc:  # a probe that crashes on the user's objects fails, with the error named
                result = _crashed(probe, exc)
        result.seconds = time.perf_counter() - start
        if probe == "data" and result.evidence.get("forward_error"):
            self.blocked = f"the model cannot run a training batch ({result.evidence['forward_error']})"
        if probe == "initial-loss" and result.verdict is Verdict.FAIL and (
                {f.slug for f in result.findings} & {"wrong-loss-for-task", "label-out-of-range"}):
            self.loss_blocked = f"the loss cannot train on these targets (initial loss: {result.summary})"
        return result

    # -- one method per probe --------------------------------------------------------------

    def _data(self) -> ProbeResult:
        from overt.doctor.probes.data import check_data

        return check_data(self.train_data, self.val_data, model=self.model, forward=self.forward,
                          batch_size=self.cfg.batch_size, seed=self.cfg.seed, collate_fn=self.collate_fn)

    def _initial_loss(self) -> ProbeResult:
        from overt.doctor.probes.initial_loss import initial_loss

        return initial_loss(self.model, self.loss_fn, self.batches(4), forward=self.forward, device=self.device)

    def _optimizer(self) -> ProbeResult:
        from overt.doctor.probes.registration import optimizer_registration

        return optimizer_registration(self.model, self.optimizer)

    def _gradients(self) -> ProbeResult:
        from overt.doctor.probes.gradients import gradient_flow

        return gradient_flow(self.model, self.loss_fn, self.batches(1)[0], forward=self.forward, device=self.device)

    def _overfit_batch(self) -> ProbeResult:
        from overt.doctor.probes.overfit import overfit_batch

        o = self.opts
        return overfit_batch(self.model, self.optimizer, self.loss_fn, self.batches(1)[0], forward=self.forward,
                             steps=o.overfit_steps, time_limit_s=o.overfit_time_s, batch_size=o.overfit_samples,
                             device=self.device)

    def _validation(self) -> ProbeResult:
        from overt.doctor.probes.validation import validation_twice

        result = validation_twice(self.model, self.val_batches(4), forward=self.forward, device=self.device,
                                  validate=self.validate, data=self.val_data if self.val_data is not None
                                  else self.train_data)
        if self.val_data is None:
            result.lines.append("no validation data was given: checked on training batches")
        return result

    def _checkpoint(self) -> ProbeResult:
        from overt.doctor.probes.checkpoint import checkpoint

        return checkpoint(self.model, self.optimizer, self.loss_fn, self.batches(1)[0], self.objs, build=self.build,
                          forward=self.forward, device=self.device, steps=self.opts.resume_steps)

    def _determinism(self) -> ProbeResult:
        from overt.doctor.probes.determinism import determinism

        return determinism(self.objs, steps=self.opts.determinism_steps)

    def _parity(self) -> ProbeResult:
        from overt.doctor.probes.parity import device_parity

        return device_parity(self.model, self.optimizer, self.loss_fn, self.batches(4), forward=self.forward,
                             steps=self.opts.parity_steps)

    def _throughput(self) -> ProbeResult:
        from overt.doctor.probes.throughput import throughput

        pin = self.device.type == "cuda"
        loader = self.train_loader(num_workers=self.cfg.num_workers, pin_memory=pin)
        data = self.train_data
        size = len(data) if hasattr(data, "__len__") and hasattr(data, "__getitem__") else None
        return throughput(self.model, self.optimizer, self.loss_fn, loader, device=self.device, forward=self.forward,
                          precision=self.cfg.precision, steps=self.opts.throughput_steps,
                          time_limit_s=self.opts.throughput_time_s, num_workers=self.cfg.num_workers,
                          dataset_size=size)

    def _lr_find(self) -> ProbeResult:
        from overt.doctor.probes.lr_find import lr_range_test

        return lr_range_test(self.model, self.optimizer, self.loss_fn, self.train_loader(), forward=self.forward,
                             device=self.device, steps=self.opts.lr_find_steps)

    def _bench(self) -> ProbeResult:
        from overt.doctor.probes.bench import device_bench

        return device_bench(self.model, self.optimizer, self.loss_fn, self.batches(1)[0], forward=self.forward)

    # -- the setup, for the note -------------------------------------------------------------

    def describe(self, name: str | None) -> dict[str, Any]:
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


#: probes that train the model, skipped when the loss does not fit the targets
_TRAINING = ("gradients", "overfit-batch", "checkpoint", "determinism", "parity", "throughput", "lr-find", "bench")

_TITLES = {"data": "Data", "initial-loss": "Initial loss", "optimizer": "Optimizer registration",
           "gradients": "Gradient flow", "overfit-batch": "Overfit one small batch", "validation": "Validation twice",
           "checkpoint": "Checkpoint round-trip and exact resume", "determinism": "Determinism",
           "parity": "CPU vs accelerator parity", "throughput": "Throughput and data starvation",
           "lr-find": "Learning-rate range test", "bench": "Device benchmark"}


def _crashed(probe: str, exc: Exception) -> ProbeResult:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/overt/" not in f.filename.replace("\\", "/")]
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    r = ProbeResult(probe, _TITLES[probe], "", verdict=Verdict.FAIL,
                    summary=f"the probe could not run: {type(exc).__name__}: {text}")
    r.lines.append(f"{type(exc).__name__}: {text}" + (f" (at {where})" if where else ""))
    r.evidence["error"] = f"{type(exc).__name__}: {text}"
    r.fix = "fix the error shown: training would hit it too"
    return r
