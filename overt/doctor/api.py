"""``overt.doctor(...)``: run the readiness probes on a training setup and return a
:class:`~overt.doctor.readiness.Readiness`.

The probes work on copies: the model's weights, the optimizer's state and every global random
generator are the same before and after."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from torch import nn

from overt.config import TrainConfig
from overt.doctor import registry
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict, skipped
from overt.doctor.setup import DoctorSettings, Setup
from overt.errors import ConfigError


def doctor_keys() -> frozenset[str]:
    """The doctor's own settings: those the probes declare."""
    return frozenset(registry.settings())


def __getattr__(name: str) -> Any:
    """``ORDER`` (the probe ids in the order they run; ``lr-find`` and ``bench`` only when asked
    for) and ``DOCTOR_KEYS``, read from the probe registry when first asked for."""
    if name == "ORDER":
        return registry.ids()
    if name == "DOCTOR_KEYS":
        return doctor_keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_settings(settings: dict[str, Any], config: TrainConfig | None = None) -> tuple[TrainConfig, DoctorSettings]:
    """Engine keys go to a TrainConfig, the doctor's own to :class:`DoctorSettings`; anything else is an error."""
    from overt.config import resolve

    cfg = config if config is not None else TrainConfig()
    keys = doctor_keys()
    engine = {k: v for k, v in settings.items() if k in type(cfg).model_fields}
    own = {k: v for k, v in settings.items() if k in keys}
    unknown = sorted(set(settings) - set(engine) - set(own))
    if unknown:
        import difflib

        valid = sorted(keys | set(type(cfg).model_fields))
        close = difflib.get_close_matches(unknown[0], valid, n=3)
        raise ConfigError(f"unknown doctor setting {unknown[0]!r}",
                          why="a misspelt setting would otherwise be ignored",
                          fix=f"did you mean {' or '.join(close)}?" if close else f"valid settings: {', '.join(valid)}")
    if engine:
        cfg = resolve(cfg.recipe_params(), {**cfg.model_dump(), **engine}, source="doctor(...) settings")
    return cfg, DoctorSettings(probe_settings=own)


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

    _check_inputs(model, train_data)
    cfg, opts = split_settings(settings, config)
    wanted = probes_to_run(only)
    directory = check_out(out) if out is not None else None
    rng = capture_rng()
    generators = _loader_generators(train_data, val_data)  # iterating a user's DataLoader advances them
    try:
        setup = Setup(model, optimizer, loss_fn, train_data, val_data, scheduler, scheduler_interval, forward,
                      collate_fn, build, validate, cfg, opts)
        wanted = [p for p in wanted if p.opt_in is None or setup.setting(p.opt_in)]
        stream = sys.stderr if progress is True else (progress or None)
        bar = Progress(len(wanted), stream)  # type: ignore[arg-type]
        results = []
        blocked: dict[str, str] = {}  # need -> why an earlier probe took it away
        for probe in wanted:
            result = run_probe(probe, setup, blocked)
            results.append(result)
            bar.line(result)
        readiness = Readiness(results, setup.describe(name))
    finally:
        restore_rng(rng)
        for generator, state in generators:
            generator.set_state(state)
    if directory is not None:
        readiness.write(directory)
    return readiness


def probes_to_run(only: list[str] | None) -> list[Probe]:
    """The registered probes, or those ``only`` names (in the registry's order); an unknown name is
    an error naming the choices."""
    if not only:
        return registry.probes()
    bad = [p for p in only if p not in registry.ids()]
    if bad:
        raise ConfigError(f"unknown probe {bad[0]!r}", fix=f"choose from: {', '.join(registry.ids())}")
    return [p for p in registry.probes() if p.id in only]


def out_dir(out: Any, cfg: Any) -> Path:
    """``out=`` if given, else ``runs_root/doctor/<recipe>-<timestamp>`` (checked and created by
    :func:`overt.doctor.api.check_out`)."""
    from overt.run.rundir import run_dir_for

    return Path(str(out)) if out else run_dir_for(None, str(Path(cfg.runs_root) / "doctor"), None, cfg.recipe)


def check_out(out: str | Path) -> Path:
    """The folder ``out`` names, created when missing; refused when it is a file or holds files other
    than an earlier readiness note (the doctor would mix its note into another run's files)."""
    from overt.doctor.readiness import JSON

    path = Path(str(out))
    if path.exists() and not path.is_dir():
        raise ConfigError(f"out={path} is a file, not a folder",
                          why="the doctor writes its note, JSON and plots into the folder `out` names",
                          fix="name a folder (it is created when missing)")
    if path.exists() and any(path.iterdir()) and not (path / JSON).exists():
        raise ConfigError(f"{path} already holds files that are not a readiness note",
                          why="the doctor would mix its note into another run's files",
                          fix="choose another out= folder, or delete it")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the folder out={path}: {exc.strerror or exc}",
                          fix="name a folder that can be written") from None
    return path


def _check_inputs(model: Any, train_data: Any) -> None:
    """Refuse, before any probe runs, what no probe can use: a model that is not a module, an empty
    training set."""
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


def _loader_generators(*datas: Any) -> list[tuple[Any, Any]]:
    import torch

    found = []
    for data in datas:
        for owner in (data, getattr(data, "sampler", None)):
            generator = getattr(owner, "generator", None)
            if isinstance(generator, torch.Generator):
                found.append((generator, generator.get_state()))
    return found


def run_probe(probe: Probe, setup: Setup, blocked: dict[str, str]) -> ProbeResult:
    """``probe`` on ``setup``: skipped when an earlier probe took away what it needs (``blocked``,
    updated with what this one takes away); failed, with the error named, when it crashes."""
    start = time.perf_counter()
    missing = [need for need in probe.needs if need in blocked]
    if missing:
        result = skipped(probe.id, probe.title, "", blocked[missing[0]])
    else:
        try:
            result = probe.run(setup)
        except Exception as exc:  # a probe that crashes on the user's objects fails, with the error named
            result = _crashed(probe, exc)
    result.seconds = time.perf_counter() - start
    if probe.blocks is not None:
        for need, why in probe.blocks(result).items():
            blocked.setdefault(need, why)
    return result


def _crashed(probe: Probe, exc: Exception) -> ProbeResult:
    from overt.frames import user_frame

    frame = user_frame(exc)
    where = f"{frame.filename}:{frame.lineno}" if frame is not None else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    r = ProbeResult(probe.id, probe.title, "", verdict=Verdict.FAIL,
                    summary=f"the probe could not run: {type(exc).__name__}: {text}")
    r.lines.append(f"{type(exc).__name__}: {text}" + (f" (at {where})" if where else ""))
    r.evidence["error"] = f"{type(exc).__name__}: {text}"
    r.fix = "fix the error shown: training would hit it too"
    return r
