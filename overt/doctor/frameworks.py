"""The doctor on a Lightning or Hugging Face project: the framework's objects turned into the
doctor's inputs (model, optimizer, loss, data, forward), so the same probes run and the same
readiness note is written.  Nothing here changes a probe.

- Lightning: a ``LightningModule`` (its ``training_step`` is the loss, its
  ``configure_optimizers`` the optimizer and scheduler) and a ``LightningDataModule`` (or the
  module's own ``train_dataloader``/``val_dataloader``).
- Hugging Face: a model that returns its own loss (``model(**batch).loss``), ``datasets``
  (or any) datasets, and optionally ``TrainingArguments`` (batch size, learning rate, weight
  decay, seed) -- or a ready ``transformers.Trainer``, whose optimizer, collator and column
  removal are used as the Trainer would use them.

The framework's own loss is used: the doctor's ``forward(model, batch)`` runs the framework's
step and hands back the model's outputs (the logits, when they can be seen) and the targets;
the doctor's ``loss_fn(output, target)`` returns the loss that step computed.  Without a
``loss_kind`` the doctor has no ln(C) reference for that loss (the initial-loss probe says
so); ``loss_kind="cross_entropy"`` gives it one.

``overt doctor FILE.py:FUNCTION`` (or ``module:function``) calls ``FUNCTION()`` and doctors
what it returns: ``(LightningModule, LightningDataModule)``, a ``LightningModule``, a
``transformers.Trainer``, or ``{"model", "train_dataset", "eval_dataset", "args"}``.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from overt.errors import ConfigError


class FrameworkLoss:
    """The doctor's ``loss_fn``: the loss the framework's step computed for ``output``.

    ``forward`` records ``(output, loss)``; ``loss_fn(output, target)`` returns that loss.
    ``loss_kind`` (``cross_entropy``, ``nll``, ``regression`` or ``other``) tells the
    initial-loss probe what to compare the loss with."""

    def __init__(self, loss_kind: str = "other"):
        self.loss_kind = loss_kind
        self._last: tuple[int, torch.Tensor] | None = None

    def record(self, output: Any, loss: torch.Tensor) -> None:
        self._last = (id(output), loss)

    def __call__(self, output: Any, target: Any) -> torch.Tensor:
        if self._last is None or self._last[0] != id(output):
            raise RuntimeError("the framework's loss is only known for the output of the step that computed it")
        loss = self._last[1]
        self._last = None
        return loss


@dataclass
class DoctorInputs:
    """What :func:`overt.doctor` takes, built from a framework project."""

    model: nn.Module
    optimizer: Any
    loss_fn: FrameworkLoss
    train_data: Any
    val_data: Any
    forward: Callable[[nn.Module, Any], tuple[Any, Any]]
    collate_fn: Any = None
    scheduler: Any = None
    scheduler_interval: str | None = None
    build: Callable[[], Any] | None = None
    name: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    def doctor(self, **settings: Any) -> Any:
        """Run the doctor on these inputs (``settings`` as for :func:`overt.doctor`)."""
        from overt.doctor.api import doctor

        kwargs = {**self.settings, **settings}
        kwargs.setdefault("name", self.name)
        return doctor(self.model, self.optimizer, self.loss_fn, self.train_data, self.val_data,
                      scheduler=self.scheduler, scheduler_interval=self.scheduler_interval, forward=self.forward,
                      collate_fn=self.collate_fn, build=self.build, **kwargs)


# -- Lightning -----------------------------------------------------------------------------

def _loss_of(result: Any, where: str) -> torch.Tensor:
    """The loss a step returned: a tensor, ``{"loss": ...}``, or an object with ``.loss``."""
    if isinstance(result, torch.Tensor):
        return result
    if isinstance(result, dict) and isinstance(result.get("loss"), torch.Tensor):
        return result["loss"]
    loss = getattr(result, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor) and result[0].dim() == 0:
        return result[0]
    raise ConfigError(f"{where} returned {type(result).__name__}, not a loss",
                      why="the doctor trains with the framework's own loss",
                      fix="return the loss tensor (or {'loss': loss}); for a model, pass labels so it computes one")


def _split_optimizers(configured: Any) -> tuple[Any, Any, str | None]:
    """(optimizer, scheduler, interval) from what ``configure_optimizers`` returns."""
    if isinstance(configured, torch.optim.Optimizer):
        return configured, None, None
    if isinstance(configured, dict):
        sched = configured.get("lr_scheduler")
        interval = "epoch"
        if isinstance(sched, dict):
            interval = sched.get("interval", "epoch")
            sched = sched.get("scheduler")
        return configured["optimizer"], sched, interval if sched is not None else None
    if isinstance(configured, (list, tuple)) and configured:
        if len(configured) == 2 and isinstance(configured[0], (list, tuple)):
            opts, scheds = configured
            first = scheds[0] if scheds else None
            interval = "epoch"
            if isinstance(first, dict):
                interval = first.get("interval", "epoch")
                first = first.get("scheduler")
            return opts[0], first, interval if first is not None else None
        return _split_optimizers(configured[0])
    raise ConfigError(f"configure_optimizers() returned {type(configured).__name__}",
                      fix="return an optimizer, a dict with 'optimizer', or ([optimizers], [schedulers])")


def _pair(batch: Any) -> Any:
    """The targets of a batch, when the batch shows them: ``(x, y)`` -> ``y``; ``{"labels": y}`` -> ``y``."""
    if isinstance(batch, (list, tuple)) and len(batch) >= 2 and isinstance(batch[-1], torch.Tensor):
        return batch[-1]
    if isinstance(batch, dict):
        for key in ("labels", "label", "target", "targets", "y"):
            if isinstance(batch.get(key), torch.Tensor):
                return batch[key]
    return None


def lightning_inputs(module: nn.Module, datamodule: Any = None, *, loss_kind: str = "other",
                     build: Callable[[], Any] | None = None) -> DoctorInputs:
    """The doctor's inputs for a ``LightningModule`` (+ ``LightningDataModule``).

    The loss is ``training_step(batch, 0)`` (automatic optimisation only: a manual one steps its
    own optimizers); the output the probes look at is what the module's ``forward`` returned
    during that step (``self(x)``), else the loss; the target is the batch's last tensor.
    ``build()`` returns a fresh ``LightningModule`` for the checkpoint probe."""
    if not getattr(module, "automatic_optimization", True):
        raise ConfigError(f"{type(module).__name__} uses manual optimisation (automatic_optimization = False)",
                          why="its training_step steps its own optimizers: the doctor cannot take one step at a time",
                          fix="doctor the model and loss it uses with overt.doctor(model, optimizer, loss_fn, data)")
    source = datamodule if datamodule is not None else module
    if datamodule is not None:
        for hook, arg in (("prepare_data", None), ("setup", "fit")):
            fn = getattr(datamodule, hook, None)
            if callable(fn):
                fn() if arg is None else fn(arg)
    train_loader = source.train_dataloader()
    try:
        val_loader = source.val_dataloader()
    except Exception:  # no validation loader defined
        val_loader = None
    if isinstance(val_loader, (list, tuple)):
        val_loader = val_loader[0] if val_loader else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            configured = module.configure_optimizers()
        except Exception as exc:
            raise ConfigError(f"{type(module).__name__}.configure_optimizers() failed outside a Trainer "
                              f"({type(exc).__name__}: {exc})",
                              fix="let configure_optimizers work without self.trainer, or pass the optimizer "
                                  "with overt.doctor(...)") from exc
    optimizer, scheduler, interval = _split_optimizers(configured)
    loss_fn = FrameworkLoss(loss_kind)

    def forward(model: nn.Module, batch: Any) -> tuple[Any, Any]:
        seen: list[Any] = []
        handle = model.register_forward_hook(lambda m, a, out: seen.append(out))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # self.log() outside a Trainer warns and does nothing
                loss = _loss_of(model.training_step(batch, 0), f"{type(model).__name__}.training_step")
        finally:
            handle.remove()
        output = seen[-1] if seen and isinstance(seen[-1], torch.Tensor) else loss
        loss_fn.record(output, loss)
        return output, _pair(batch)

    def rebuild() -> Any:
        fresh = build() if build is not None else None
        if fresh is None:
            return None
        opt, _, _ = _split_optimizers(fresh.configure_optimizers())
        return fresh, opt

    data = {}
    for key, loader in (("train_data", train_loader), ("val_data", val_loader)):
        data[key] = getattr(loader, "dataset", loader) if loader is not None else None
    settings: dict[str, Any] = {}
    collate = getattr(train_loader, "collate_fn", None)
    if getattr(train_loader, "batch_size", None):
        settings["batch_size"] = int(train_loader.batch_size)
    if val_loader is not None and getattr(val_loader, "batch_size", None):
        settings["val_batch_size"] = int(val_loader.batch_size)
    name = type(module).__name__ + (f" + {type(datamodule).__name__}" if datamodule is not None else "")
    return DoctorInputs(module, optimizer, loss_fn, data["train_data"], data["val_data"], forward, collate,
                        scheduler, interval, rebuild if build is not None else None, name, settings)


# -- Hugging Face ----------------------------------------------------------------------------

def _forward_columns(model: nn.Module) -> set[str] | None:
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return set(params) | {"label", "label_ids", "labels"}


def _keep_columns(dataset: Any, columns: set[str] | None) -> Any:
    """A ``datasets.Dataset`` without the columns ``forward`` does not take (as the Trainer does)."""
    names = getattr(dataset, "column_names", None)
    if columns is None or not names or not hasattr(dataset, "remove_columns"):
        return dataset
    drop = [c for c in names if c not in columns]
    return dataset.remove_columns(drop) if drop else dataset


def hf_inputs(model: nn.Module = None, train_dataset: Any = None, eval_dataset: Any = None, args: Any = None, *,
              trainer: Any = None, data_collator: Any = None, loss_kind: str = "other",
              build: Callable[[], nn.Module] | None = None) -> DoctorInputs:
    """The doctor's inputs for a Hugging Face model that returns its own loss (``model(**batch)``
    with ``labels`` in the batch), or for a ready ``transformers.Trainer`` (``trainer=``).

    With ``args`` (``TrainingArguments``) the batch sizes, seed, learning rate and weight decay
    are the run's; the optimizer is the Trainer's own (``trainer.create_optimizer()``) when a
    Trainer is given, else AdamW as the Trainer builds it by default."""
    if trainer is not None:
        model = trainer.model
        args = trainer.args
        train_dataset = trainer.train_dataset if train_dataset is None else train_dataset
        eval_dataset = trainer.eval_dataset if eval_dataset is None else eval_dataset
        data_collator = trainer.data_collator if data_collator is None else data_collator
        optimizer = trainer.create_optimizer()
    else:
        if model is None or train_dataset is None:
            raise ConfigError("the doctor needs an HF model and a training dataset",
                              fix="overt.doctor.frameworks.hf_inputs(model, train_dataset, eval_dataset, args)")
        lr = float(getattr(args, "learning_rate", 5e-5))
        decay = float(getattr(args, "weight_decay", 0.0))
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=decay)
    if isinstance(eval_dataset, dict):
        eval_dataset = next(iter(eval_dataset.values()), None)
    if args is None or getattr(args, "remove_unused_columns", True):
        columns = _forward_columns(model)
        train_dataset = _keep_columns(train_dataset, columns)
        eval_dataset = _keep_columns(eval_dataset, columns) if eval_dataset is not None else None
    if data_collator is None:
        try:
            from transformers import default_data_collator as data_collator
        except ImportError:
            data_collator = None
    loss_fn = FrameworkLoss(loss_kind)

    def forward(model: nn.Module, batch: Any) -> tuple[Any, Any]:
        if not isinstance(batch, dict):
            raise ConfigError(f"an HF model takes batches as dicts of tensors, got {type(batch).__name__}",
                              fix="datasets with named columns (and 'labels'), collated by the Trainer's collator")
        out = model(**batch)
        loss = _loss_of(out, f"{type(model).__name__}(**batch)")
        logits = out.get("logits") if isinstance(out, dict) else getattr(out, "logits", None)
        output = logits if isinstance(logits, torch.Tensor) else loss
        loss_fn.record(output, loss)
        return output, _pair(batch)

    def rebuild() -> Any:
        fresh = build()  # type: ignore[misc]
        opt = type(optimizer)([p for p in fresh.parameters() if p.requires_grad], **{
            k: v for k, v in optimizer.defaults.items() if k in ("lr", "weight_decay", "betas", "eps", "momentum")})
        return fresh, opt

    settings: dict[str, Any] = {}
    if args is not None:
        settings["batch_size"] = int(args.per_device_train_batch_size)
        settings["val_batch_size"] = int(args.per_device_eval_batch_size)
        settings["seed"] = int(args.seed)
    return DoctorInputs(model, optimizer, loss_fn, train_dataset, eval_dataset, forward, data_collator,
                        build=rebuild if build is not None else None, name=type(model).__name__, settings=settings)


# -- dispatch ----------------------------------------------------------------------------------

def inputs_for(project: Any, **kw: Any) -> DoctorInputs:
    """The doctor's inputs for what a project function returned (see the module docstring)."""
    if isinstance(project, DoctorInputs):
        return project
    names = {c.__name__ for c in type(project).__mro__}
    if "Trainer" in names and hasattr(project, "create_optimizer") and hasattr(project, "args"):
        return hf_inputs(trainer=project, **kw)
    if isinstance(project, dict) and "model" in project:
        return hf_inputs(**{k: project.get(k) for k in ("model", "train_dataset", "eval_dataset", "args",
                                                        "data_collator")}, **kw)
    if isinstance(project, (tuple, list)) and project and hasattr(project[0], "training_step"):
        return lightning_inputs(project[0], project[1] if len(project) > 1 else None, **kw)
    if hasattr(project, "training_step") and hasattr(project, "configure_optimizers"):
        return lightning_inputs(project, **kw)
    raise ConfigError(f"cannot doctor a {type(project).__name__}",
                      fix="return (LightningModule, LightningDataModule), a LightningModule, a transformers.Trainer, "
                          "or {'model', 'train_dataset', 'eval_dataset', 'args'}")


def is_project(obj: Any) -> bool:
    """Whether ``obj`` is a framework project :func:`project_doctor` takes (a LightningModule,
    a transformers ``Trainer``, or ready :class:`DoctorInputs`)."""
    if isinstance(obj, DoctorInputs):
        return True
    if hasattr(obj, "training_step") and hasattr(obj, "configure_optimizers"):
        return True
    return hasattr(obj, "create_optimizer") and hasattr(obj, "args") and hasattr(obj, "train_dataset")


def project_doctor(project: Any, datamodule: Any = None, *, loss_kind: str = "other",
                   build: Callable[[], Any] | None = None, **settings: Any) -> Any:
    """``overt.doctor(lightning_module, datamodule, ...)`` / ``overt.doctor(hf_trainer, ...)``:
    the probes on a framework project; ``settings`` as for :func:`overt.doctor`."""
    if isinstance(project, DoctorInputs):
        return project.doctor(**settings)
    if hasattr(project, "training_step"):
        return lightning_inputs(project, datamodule, loss_kind=loss_kind, build=build).doctor(**settings)
    return hf_inputs(trainer=project, loss_kind=loss_kind, build=build).doctor(**settings)


def _imported(load: Callable[[], Any], what: str, path: str) -> Any:
    """``load()``, with a failure while importing the user's project said as an error naming the
    project's line (a missing package: also where Python looked), never a traceback."""
    from overt.frames import user_frame
    from overt.recipes.base import _exec

    def explained() -> Any:
        try:
            return load()
        except ModuleNotFoundError as exc:
            frame = user_frame(exc)
            raise ConfigError(f"importing {what} failed: {exc}",
                              where=f"{frame.filename}:{frame.lineno}" if frame is not None else "",
                              why=f"while it is imported, Python looks for packages in {path} and in what is "
                                  "installed or on PYTHONPATH",
                              fix=f"install the package {exc.name!r}, or put the folder that holds it on "
                                  "PYTHONPATH (PYTHONPATH=. overt doctor ... when it is the current folder: "
                                  "the overt command does not look there)") from None

    return _exec(explained, f"importing {what}")


def load_project(target: str) -> tuple[Callable[[], Any], str]:
    """``"file.py:function"`` or ``"package.module:function"`` -> (the function, a name)."""
    import importlib
    from pathlib import Path

    path, _, func = target.rpartition(":")
    if not path or not func.isidentifier():
        raise ConfigError(f"cannot read the project {target!r}", fix="write FILE.py:FUNCTION or module.path:FUNCTION")
    if path.endswith(".py"):
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"no such file: {path}", fix="give the path of the file that builds the project")
        from overt.recipes.base import module_from_file

        module = _imported(lambda: module_from_file(file, f"_overt_project_{file.stem}", folder_on_path=True),
                           f"the project file {path}", f"its own folder ({file.resolve().parent})")
        name = file.stem
    else:
        module = _imported(lambda: importlib.import_module(path), f"the project module {path}", "the current folder")
        name = path.rsplit(".", 1)[-1]
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ConfigError(f"{path} has no function {func!r}", fix=f"define def {func}(): return ... in {path}")
    return fn, f"{name}-{func}"


def run_project(args: Any) -> tuple[Any, Any]:
    """``overt doctor FILE.py:FUNCTION [key=value ...]``: build the project, run the probes, write
    the note (``out=`` or ``runs/doctor/<file>-<function>-<time>``).  ``loss_kind=cross_entropy``
    gives the initial-loss probe its ln(C) reference."""
    import sys
    from pathlib import Path

    from overt.config import TrainConfig, parse_overrides
    from overt.doctor.api import out_dir

    values = parse_overrides(args.overrides)
    out = values.pop("out", None)
    loss_kind = str(values.pop("loss_kind", "other"))
    if loss_kind not in ("cross_entropy", "nll", "regression", "other"):
        raise ConfigError(f"loss_kind={loss_kind!r}", fix="use cross_entropy, nll, regression or other")
    fn, name = load_project(args.target)
    inputs = inputs_for(fn(), loss_kind=loss_kind)
    inputs.name = inputs.name or name
    cfg = TrainConfig(recipe=Path(args.target.rpartition(":")[0]).stem + "-" + args.target.rpartition(":")[2])
    directory = out_dir(out, cfg)
    settings = {**values}
    if args.lr_find:
        settings["lr_find"] = True
    if args.bench:
        settings["bench"] = True
    only = [p.strip() for p in args.only.split(",")] if args.only else None
    readiness = inputs.doctor(progress=sys.stderr if not args.quiet else False, only=only, out=directory,
                              **settings)  # doctor() checks the settings, --only and out= once
    return readiness, directory


__all__ = ["DoctorInputs", "FrameworkLoss", "hf_inputs", "inputs_for", "is_project", "lightning_inputs",
           "load_project", "project_doctor", "run_project"]
