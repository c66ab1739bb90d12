"""Run configuration: the engine's settings plus a recipe's own parameters.

One flat namespace, so a user overrides anything the same way::

    overt train digits epochs=5 lr=0.01 precision=bf16

Engine settings are the fields of :class:`TrainConfig`.  A recipe adds its own
parameters through its module-level ``defaults`` dict (and may change engine
defaults there, e.g. ``epochs``).  Unknown keys and ill-typed values are
rejected with the valid choices named.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from overt.errors import ConfigError


class _Yaml12Loader(yaml.SafeLoader):
    """YAML with 1.2 booleans: only true/false are booleans (``progress: off`` stays the string 'off')."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


class _NoAliasLoader(_Yaml12Loader):
    """:class:`_Yaml12Loader` refusing aliases (``*name``): files overt writes never hold one, and a few
    nested aliases (an "alias bomb") expand to gigabytes when the result is walked."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ValueError(f"YAML alias *{event.anchor} at line {event.start_mark.line + 1}: aliases are not "
                             "accepted in this file")
        return super().compose_node(parent, index)


def load_yaml(text: str, *, aliases: bool = True) -> Any:
    """Parse YAML with 1.2 booleans (safe: no Python objects); ``aliases=False`` refuses aliases with
    a ``ValueError`` (for files overt wrote itself, which never hold one)."""
    return yaml.load(text, Loader=_Yaml12Loader if aliases else _NoAliasLoader)  # noqa: S506 - SafeLoader subclasses


_DEVICE = re.compile(r"^(auto|cpu|mps|meta|(cuda|xpu|hpu|npu|xla|mtia|privateuseone)(:\d+)?)$")


def check_preempt_signal(name: str) -> int:
    """The signal number of ``name`` (``SIGUSR1``, ``USR1`` or ``10``); ``ValueError`` for an unknown
    signal or one a process cannot catch (SIGKILL, SIGSTOP)."""
    import signal

    text = name.strip().upper()
    try:
        sig = signal.Signals(int(text)) if text.isdigit() else signal.Signals[text if text.startswith("SIG") else "SIG" + text]
    except (KeyError, ValueError):
        raise ValueError(f"unknown signal {name!r}: use a signal name such as SIGUSR1 or SIGUSR2") from None
    if sig in (signal.SIGKILL, signal.SIGSTOP):
        raise ValueError(f"{sig.name} cannot be caught by a process, so it can never mean 'save and stop': "
                         "use SIGUSR1 or SIGUSR2")
    return int(sig)


def _setting(section: str, affects_result: bool, *args: Any, **kwargs: Any) -> Any:
    return Field(*args, json_schema_extra={"section": section, "affects_result": affects_result}, **kwargs)


def _result(section: str, *args: Any, **kwargs: Any) -> Any:
    """A field of ``section`` (the plug-in it configures) whose value changes what a run computes:
    changing it on resume is reported (see :func:`affects_result`).  Arguments: pydantic's ``Field``."""
    return _setting(section, True, *args, **kwargs)


def _cosmetic(section: str, *args: Any, **kwargs: Any) -> Any:
    """A field of ``section`` that changes where and how a run is recorded, shown or saved, never
    what it computes: it may change freely on resume."""
    return _setting(section, False, *args, **kwargs)


class TrainConfig(BaseModel):
    """Engine settings.  Every field can be set in a config file, a recipe's
    ``defaults`` or on the command line as ``key=value``.  Each field belongs to one section (the
    plug-in it configures: :func:`sections`) and says whether it affects the result
    (:func:`affects_result`); the namespace users write stays flat."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    recipe: str = _result("run", "digits", description="built-in recipe name, recipe .py file, or module path")
    name: str | None = _cosmetic("run", None, description="run name (default: recipe name + timestamp)")
    run_dir: str | None = _cosmetic("run", None, description="exact run directory (default: runs_root/name)")
    runs_root: str = _cosmetic("run", "runs", description="parent folder of generated run directories")
    seed: int = _result("run", 0, description="seeds python, numpy, torch (CPU and CUDA) and the data order")
    epochs: int = _result("run", 10, ge=1, description="number of passes over the training data")
    # (upper bound: no real batch is larger, and 2 x batch_size must stay a valid index for the loaders)
    batch_size: int = _result("data", 64, ge=1, le=2**40, description="micro-batch size of the training loader")
    val_batch_size: int | None = _result(
        "data", None, ge=1, le=2**40,
        description="validation batch size (default: 2 x batch_size)")
    num_workers: int = _result("data", 0, ge=0, description="DataLoader worker processes")
    drop_last: bool = _result("data", False,
                              description="training loader: drop the last incomplete batch (a tiny last batch gives "
                                          "BatchNorm noise statistics); validation always sees every sample")
    persistent_workers: bool = _cosmetic(
        "data", False,
        description="keep loader workers alive between epochs (needs num_workers > 0)")
    prefetch_factor: int | None = _cosmetic(
        "data", None, ge=1,
        description="batches each loader worker prepares ahead (needs num_workers > 0; None: PyTorch's 2)")
    accumulate: int = _result("optimization", 1, ge=1,
                              description="micro-batches per optimizer step (gradient accumulation)")
    clip_grad_norm: float | None = _result(
        "optimization", None, gt=0,
        description="max total gradient norm (None: no clipping)")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = _result(
        "hardware", "auto",
        description="auto = bf16 where the accelerator supports it, fp32 on CPU")
    device: str = _result("hardware", "auto", description="auto, cpu, cuda, cuda:1, mps")
    compile: bool = _result("hardware", False, description="wrap the model in torch.compile")
    threads: int | None = _cosmetic(
        "hardware", None, ge=1,
        description="intra-op CPU threads for the run (torch.set_num_threads); None: torch's default, one per "
                    "core. On a busy machine threads=1 can be many times faster")
    strategy: Literal["auto", "ddp", "fsdp", "none"] = _result(
        "distributed", "auto",
        description="multi-process training (torchrun / nproc=N): auto = ddp when WORLD_SIZE > 1; fsdp = FSDP2")
    fsdp_wrap: list[str] = _result("distributed", default_factory=list,
                                   description="strategy=fsdp: submodule class names or qualified names sharded as "
                                               "their own unit (default: every direct child with parameters)")
    activation_checkpointing: list[str] = _result(
        "memory", default_factory=list,
        description="submodule names or class names whose activations are recomputed in backward")
    log_every: int = _cosmetic("logging", 50, ge=1, description="optimizer steps between logged training points")
    debug_anomaly: bool = _cosmetic("debug", False,
                                    description="run under torch.autograd anomaly mode (slow): the first backward "
                                                "operation that produces NaN is named, with its forward line")
    log_grad_norms: bool = _cosmetic("logging", False,
                                     description="also log each layer's gradient norm (grad_norm/<layer>) at every "
                                                 "logged point")
    val_every: int = _result("validation", 1, ge=1, description="epochs between validations")
    monitor: str = _result("validation", "val/loss", description="metric that defines the best model")
    monitor_mode: Literal["min", "max"] = _result(
        "validation", "min",
        description="whether lower or higher is better")
    progress: Literal["auto", "bar", "plain", "off"] = _cosmetic(
        "logging", "auto",
        description="auto = a bar on a terminal, plain lines otherwise")
    tensorboard: bool = _cosmetic("logging", True, description="write TensorBoard event files into the run directory")
    guards: bool = _cosmetic("guards", True, description="run overt's runtime guards during training")
    strict: bool = _cosmetic("guards", False, description="guards: turn warnings into errors")
    ignore: list[str] = _cosmetic("guards", default_factory=list, description="guards: slugs (or codes) to silence")
    checkpoint: bool = _cosmetic("checkpoint", True,
                                 description="write checkpoints into the run directory (see docs/checkpoints.md)")
    checkpoint_every_steps: int | None = _cosmetic(
        "checkpoint", None, ge=1,
        description="save a checkpoint every N optimizer steps")
    checkpoint_every_epochs: int | None = _cosmetic(
        "checkpoint", 1, ge=1,
        description="save a checkpoint every N epochs")
    keep_last: int | None = _cosmetic("checkpoint", 3, ge=1,
                                      description="keep the newest K checkpoints (None: keep all)")
    keep_best: int = _cosmetic("checkpoint", 1, ge=0,
                               description="also keep the K best epoch checkpoints by `monitor`")
    checkpoint_background: bool = _cosmetic(
        "checkpoint", True,
        description="write checkpoints to disk in a background thread")
    plots: bool = _cosmetic("report", False,
                            description="draw PNG plots of the metrics into RUN_DIR/plots at the end (needs the plots "
                                        "extra: matplotlib)")
    mlflow: bool = _cosmetic("mlflow", False,
                             description="log the run to MLflow (needs the mlflow extra); also on when mlflow_uri or "
                                         "mlflow_experiment is set")
    mlflow_uri: str | None = _cosmetic("mlflow", None,
                                       description="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else MLflow's "
                                                   "default sqlite:///mlflow.db)")
    mlflow_experiment: str | None = _cosmetic(
        "mlflow", None,
        description="MLflow experiment name (default: overt)")
    wandb: bool = _cosmetic("wandb", False,
                            description="log the run to Weights & Biases (needs the wandb extra); also on when "
                                        "wandb_project or wandb_mode is set")
    wandb_project: str | None = _cosmetic(
        "wandb", None,
        description="W&B project (default: overt)")
    wandb_mode: Literal["online", "offline", "disabled"] | None = _cosmetic(
        "wandb", None,
        description="W&B mode: offline logs without network (default: W&B's own, WANDB_MODE)")
    metrics_csv: bool = _cosmetic("logging", True,
                                  description="also write the metrics as RUN_DIR/metrics.csv (from metrics.jsonl)")
    early_stop: int | None = _result("early_stop", None, ge=1,
                                     description="stop after N validations in a row without an improvement of "
                                                 "`monitor` (None: train every epoch)")
    early_stop_min_delta: float = _result(
        "early_stop", 0.0, ge=0,
        description="early_stop: the least change of `monitor` that counts as an improvement")
    preempt_signal: str | None = _cosmetic(
        "checkpoint", None,
        description="extra signal that, like SIGTERM and SIGINT, makes the run save and stop (e.g. SIGUSR1)")

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        if not _DEVICE.match(value):
            raise ValueError("not a device: use auto, cpu, cuda, cuda:N, mps or xpu (PyTorch device names)")
        return value

    @model_validator(mode="after")
    def _workers_for_worker_settings(self) -> TrainConfig:
        if self.num_workers == 0:
            given = [k for k in ("persistent_workers", "prefetch_factor") if getattr(self, k) not in (False, None)]
            if given:
                raise ValueError(f"{' and '.join(given)} need loader workers, but num_workers=0: "
                                 f"set num_workers=N (N > 0), or drop {' and '.join(given)}")
        return self

    @field_validator("preempt_signal")
    @classmethod
    def _catchable_signal(cls, value: str | None) -> str | None:
        if value is not None:
            check_preempt_signal(value)
        return value

    def recipe_params(self) -> dict[str, Any]:
        """The recipe's own parameters (fields that are not engine settings)."""
        return {k: v for k, v in self.model_dump().items() if k not in TrainConfig.model_fields}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


ENGINE_KEYS = frozenset(TrainConfig.model_fields)


def _marks(key: str) -> dict[str, Any]:
    info = TrainConfig.model_fields.get(key)
    extra = info.json_schema_extra if info is not None else None
    return extra if isinstance(extra, dict) else {}


def affects_result(key: str) -> bool:
    """Whether config key ``key`` changes what a run computes (a recipe's own parameter always
    does): what ``overt resume`` compares between a checkpoint's config and the new one."""
    return bool(_marks(key).get("affects_result", key not in ENGINE_KEYS))


def sections() -> dict[str, list[str]]:
    """The engine settings grouped by the plug-in they configure (``{"data": ["batch_size", ...]}``)."""
    out: dict[str, list[str]] = {}
    for key in TrainConfig.model_fields:
        out.setdefault(str(_marks(key)["section"]), []).append(key)
    return out


_CLASSES: dict[str, type[TrainConfig]] = {}  # defaults -> class: building one costs ~30 ms (a sweep's grid)


def config_class(recipe_defaults: dict[str, Any]) -> type[TrainConfig]:
    """A TrainConfig subclass with the recipe's parameters as typed fields (one class per defaults)."""
    key = repr(sorted((k, type(v).__qualname__, repr(v)) for k, v in recipe_defaults.items()))
    cls = _CLASSES.get(key)
    if cls is None:
        cls = _CLASSES[key] = _config_class(recipe_defaults)
    return cls


def _config_class(recipe_defaults: dict[str, Any]) -> type[TrainConfig]:
    fields: dict[str, Any] = {}
    engine_defaults: dict[str, Any] = {}
    for key, value in recipe_defaults.items():
        if key in ENGINE_KEYS:
            engine_defaults[key] = value
        else:
            annotation: Any = type(value) if value is not None else Any
            if annotation is float:
                annotation = float  # pydantic accepts ints for floats
            fields[key] = (annotation, value)
    for key, value in engine_defaults.items():  # a new default; the type and its constraints stay
        info = TrainConfig.model_fields[key]
        annotated: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        fields[key] = (annotated, Field(value, description=info.description, json_schema_extra=info.json_schema_extra))
    return create_model("RunConfig", __base__=TrainConfig, **fields)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=0.01", "ignore=[graph-leak]"]`` -> ``{"lr": 0.01, "ignore": ["graph-leak"]}``.
    Values are read as YAML scalars/lists, so numbers, booleans and lists work."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(
                f"cannot read the override {item!r}",
                why="overrides are key=value pairs",
                fix="write it as key=value, e.g. epochs=5 or lr=0.001",
            )
        try:
            out[key] = load_yaml(raw) if raw.strip() else None
        except yaml.YAMLError:
            out[key] = raw
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML config.  A relative ``recipe:`` file path is resolved against the file's folder."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}", fix="check the path") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML", where=str(exc).splitlines()[0],
                          fix="fix the YAML syntax at the position shown") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of key: value",
                          fix="write one `key: value` per line, e.g. `recipe: digits`")
    recipe = data.get("recipe")
    if isinstance(recipe, str) and recipe.endswith(".py") and not Path(recipe).is_absolute():
        data["recipe"] = str((path.parent / recipe).resolve())
    return data


def resolve(recipe_defaults: dict[str, Any], values: dict[str, Any], source: str = "config") -> TrainConfig:
    """Validate ``values`` against the engine settings plus the recipe's parameters."""
    cls = config_class(recipe_defaults)
    known = sorted(cls.model_fields)
    unknown = [k for k in values if k not in cls.model_fields]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, known, n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else f"valid keys: {', '.join(known)}"
        raise ConfigError(
            f"unknown config key {key!r} (from {source})",
            why="a misspelt key would otherwise be silently ignored and the run would use the default",
            fix=hint,
        )
    try:
        return cls(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        if not key:  # a rule across keys (e.g. worker settings without workers): the message names them
            what, _, fix = err["msg"].removeprefix("Value error, ").partition(": ")
            raise ConfigError(f"{what} (from {source})", fix=fix or "change the keys named") from None
        raise ConfigError(
            f"bad value for config key {key!r}: {err['msg']} (got {err.get('input')!r}, from {source})",
            fix=f"give {key} a valid value",
        ) from None
