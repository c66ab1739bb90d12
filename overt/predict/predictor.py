"""``Predictor``: a finished run's model, rebuilt from the run's own config and recipe, ready for inputs.

Safety: the only code imported is the recipe named in the run's ``config.yaml``
(the file that trained it; its path is printed), and the weights are read from
``model.safetensors`` with safetensors -- nothing is ever unpickled.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

from overt.errors import OvertError
from overt.predict.runfiles import RunError

__all__ = ["Predictor", "RunError", "load_run", "weights_for"]


class Predictor:
    """Runs ``model`` on raw inputs in batches, under ``eval()`` and ``torch.inference_mode()``.

    ``preparation`` (:class:`overt.Preprocessing`, the recipe's declared preprocessing, as the
    run recorded it) turns raw inputs into the model's inputs and outputs into answers (class,
    label, probability and the top classes; a regression target in its own units).  A recipe
    without one may define ``preprocess(inputs, meta)`` / ``postprocess(output, meta)``;
    ``predict_fn(model, inputs, meta)`` replaces both (outputs that are not one forward pass,
    such as sampled text).  Without any, inputs are given to the model as they are.

    Before the model sees a batch, it is checked against ``record`` (what the model was trained
    on, :mod:`overt.record`): the problems found are kept in :attr:`findings`
    (``train-serve-skew``).

    Usually made with :meth:`from_run`::

        predictor = overt.Predictor.from_run("runs/digits-20260101-120000")
        predictor.predict(load_digits().data[:2])
        # [{'class': 0, 'label': '0', 'probability': 0.99, 'top': [...]}, ...]
    """

    def __init__(self, model: nn.Module, *, preprocess: Callable[[list[Any], dict[str, Any]], Any] | None = None,
                 postprocess: Callable[[Any, dict[str, Any]], list[Any]] | None = None,
                 predict_fn: Callable[[nn.Module, list[Any], dict[str, Any]], list[Any]] | None = None,
                 meta: dict[str, Any] | None = None, device: str | torch.device = "cpu", batch_size: int = 256,
                 module: ModuleType | None = None, config: Any = None, record: dict[str, Any] | None = None,
                 preparation: Any = None, top_k: int = 3, raw: bool = False):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise RunError(f"batch size {batch_size!r} is not a positive number of inputs",
                           fix="give --batch-size 1 or more (default 256)")
        self.device = _device(str(device))
        self.model = model.to(self.device).eval()
        self.preprocess, self.postprocess, self.predict_fn = preprocess, postprocess, predict_fn
        self.meta = dict(meta or {})
        self.batch_size = batch_size
        self.module, self.config = module, config
        self.record = dict(record or {})
        self.preparation = preparation
        self.top_k, self.raw = top_k, raw
        self.findings: list[Any] = []
        self.problems: list[dict[str, Any]] = []

    @classmethod
    def from_run(cls, run_dir: str | Path, *, device: str = "auto", batch_size: int = 256,
                 quiet: bool = False, recipe: str | None = None, trust_recipe: bool = False,
                 command: str = "overt predict", weights: str | Path | None = None, top_k: int = 3,
                 raw: bool = False) -> Predictor:
        """Rebuild the model of the finished run in ``run_dir`` from its ``config.yaml`` and recipe,
        load ``model.safetensors`` (or ``weights``) strictly, and prepare inputs with the preprocessing the
        run recorded (``inputs.json``), else the recipe's ``preprocess``/``postprocess`` (or ``predict``).
        Unless ``quiet``, stderr names the recipe file imported.  A recipe that is not built in is imported
        only when this machine trained the run with it, or with ``trust_recipe`` / ``recipe=FILE`` (see
        :func:`load_run`)."""
        from overt.checkpoint.codec import CheckpointError
        from overt.checkpoint.weights import load_module_state, load_weights
        from overt.predict.runfiles import build_checked, read_final_weights, read_record, weights_shapes
        from overt.recipes.base import build_recipe
        from overt.run.rundir import RunDir

        if not isinstance(batch_size, int) or batch_size < 1:
            raise RunError(f"batch size {batch_size!r} is not a positive number of inputs",
                           fix="give --batch-size 1 or more (default 256)")
        run = Path(run_dir)
        module, cfg, meta = load_run(run_dir, quiet, recipe=recipe, trust_recipe=trust_recipe, command=command,
                                     need_weights=weights is None)
        record, preparation = read_record(run)  # before the model is built: a damaged record costs nothing
        build_model = getattr(module, "build_model", None)
        if build_model is not None:
            shapes = weights_shapes(Path(weights) if weights is not None else None, run)
            model = build_checked(lambda: build_model(cfg, meta), shapes, RunDir(run).config)
        else:  # a recipe without build_model: build it whole (this loads its data)
            model = build_recipe(module, cfg).model
        try:
            if weights is None:  # the final weights, checked against the hash recorded when the run finished
                load_module_state(model, read_final_weights(run), strict=True, source=str(RunDir(run).weights))
            else:
                load_weights(model, Path(weights), strict=True)
        except CheckpointError as exc:
            raise RunError(exc.what, where=exc.where, why=exc.why, fix=exc.fix) from None
        if preparation is None and getattr(module, "preprocess", None) is None and not quiet \
                and getattr(module, "predict", None) is None:
            print("overt: this run declares no preprocessing: inputs are given to the model as they are",
                  file=sys.stderr)
        return cls(model, preprocess=getattr(module, "preprocess", None),
                   postprocess=getattr(module, "postprocess", None), predict_fn=getattr(module, "predict", None),
                   meta=meta, device=device, batch_size=batch_size, module=module, config=cfg, record=record,
                   preparation=preparation, top_k=top_k, raw=raw)

    def run_batch(self, inputs: Any) -> Any:
        """The model on one prepared batch (a tensor or a tuple of them), on the predictor's device."""
        from overt.engine.device import move_to_device

        inputs = move_to_device(inputs, self.device)
        with torch.inference_mode():
            return self.model(*inputs) if isinstance(inputs, tuple) else self.model(inputs)

    def expects(self) -> Any:
        """What the model takes (:class:`overt.predict.inputs.Expect`), from the run's record: how
        ``overt predict`` reads a CSV's first row and stdin."""
        from overt.predict.inputs import Expect

        prep = self.preparation
        schema = self.record.get("schema") or {}
        if prep is not None and prep.is_text:
            return Expect(text=True)
        if prep is not None:
            return Expect(width=prep.n_features(), features=tuple(prep.features) if prep.features else None)
        features = schema.get("features")
        shape = schema.get("shape")
        width = int(math.prod(shape)) if shape and schema.get("dtype", "").startswith("float") else None
        return Expect(width=width, features=tuple(features) if features else None)

    def prepare(self, chunk: Sequence[Any], offset: int = 0) -> Any:
        """Raw inputs -> the model's input batch (the declared preprocessing, else the recipe's);
        ``offset`` numbers the first input in errors."""
        if self.preparation is not None:
            return self.preparation.tensor(chunk, offset)
        if self.preprocess is not None:
            return self.preprocess(list(chunk), self.meta)
        return _numbers(chunk, self.record, offset)

    def answer(self, output: Any) -> list[Any]:
        from overt.preprocessing import answers

        output = output.detach().float().cpu() if isinstance(output, torch.Tensor) else output
        if self.raw:
            return answers(output.numpy(), "raw")
        if self.preparation is not None:
            return self.preparation.answer(output.numpy(), top_k=self.top_k)
        if self.postprocess is not None:
            return self.postprocess(output, self.meta)
        classes = self.record.get("classes")
        if classes and output.dim() == 2 and output.shape[1] == classes.get("count"):
            return answers(output.numpy(), "classification", labels=classes.get("names"), top_k=self.top_k)
        return answers(output.numpy(), "raw")

    def check(self, batch: Any, offset: int) -> None:
        """Compare a prepared batch with what the model was trained on; keep the problems found
        (merged by kind, at most :data:`ROWS_KEPT` row numbers each: memory stays bounded)."""
        from overt.record import check_inputs

        if isinstance(batch, torch.Tensor) and batch.is_floating_point():
            for problem in check_inputs(batch.detach().cpu().numpy(), self.record, offset=offset):
                seen = next((p for p in self.problems if p["kind"] == problem["kind"]), None)
                if seen is None:
                    self.problems.append({**problem, "count": len(problem["rows"]),
                                          "rows": problem["rows"][:ROWS_KEPT]})
                else:
                    seen["count"] += len(problem["rows"])
                    seen["rows"] += problem["rows"][:max(0, ROWS_KEPT - len(seen["rows"]))]

    def predict(self, inputs: Sequence[Any]) -> list[Any]:
        """One JSON-ready prediction per raw input, computed ``batch_size`` inputs at a time.  Inputs that
        look unlike the training data are reported in :attr:`findings` (``train-serve-skew``)."""
        inputs = list(inputs)
        return [answer for chunk in self.predict_chunks([inputs] if inputs else []) for answer in chunk]

    def predict_chunks(self, chunks: Iterable[Sequence[Any]]) -> Iterator[list[Any]]:
        """The answers to each chunk of raw inputs as soon as it is computed (``overt predict`` streams a
        large input this way, in bounded memory); :attr:`findings` is complete once every chunk is
        answered.  Errors about an input number it from the first input of the first chunk."""
        self.problems, self.findings = [], []
        total = 0
        for chunk in chunks:
            chunk = list(chunk)
            if self.predict_fn is not None:
                with torch.inference_mode():
                    yield list(self.predict_fn(self.model, chunk, self.meta))
                total += len(chunk)
                continue
            results: list[Any] = []
            for start in range(0, len(chunk), self.batch_size):
                batch = self.prepare(chunk[start:start + self.batch_size], total + start)
                self.check(batch, total + start)
                results += self.answer(self.run_batch(batch))
            total += len(chunk)
            yield results
        self.findings = skew_findings(self.problems, total, self.record)

    __call__ = predict


def _device(spec: str) -> torch.device:
    """The device ``spec`` names, or :class:`RunError` when it is not one this machine has."""
    from overt.engine.device import pick_device

    try:
        device = pick_device(spec)
    except OvertError:
        raise
    except (RuntimeError, ValueError) as exc:
        raise RunError(f"--device {spec!r} is not a device: {str(exc).splitlines()[0]}",
                       fix="use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise RunError("--device mps was asked for, but MPS is not available here", fix="use --device auto or cpu")
    if device.type not in ("cpu", "cuda", "mps"):
        raise RunError(f"--device {spec!r}: overt predict runs on cpu, cuda or mps", fix="use auto, cpu, cuda or mps")
    return device


def skew_findings(problems: list[dict[str, Any]], total: int, record: dict[str, Any]) -> list[Any]:
    """``train-serve-skew`` findings, one per kind of problem, merged over the batches."""
    from overt.findings import Finding
    from overt.record import describe

    merged: dict[str, dict[str, Any]] = {}
    for p in problems:
        seen = merged.setdefault(p["kind"], {**p, "rows": [], "count": 0})
        seen["rows"] += p["rows"]
        seen["count"] += p.get("count", len(p["rows"]))
    sample = (record.get("sample") or {}).get("size")
    fixes = {
        "scale": "give raw inputs in the units of the training data, and do not prepare them yourself: overt "
                 "predict applies the run's declared preprocessing",
        "outside": "check the columns' order and units against the training data (inputs.json in the run "
                   "directory lists the schema and each feature's range)",
        "constant": "check how the inputs were produced: a constant row is usually a blank image, a fill value or "
                    "a failed read",
    }
    out = []
    for kind, p in merged.items():
        rows = p["rows"]
        out.append(Finding("train-serve-skew", f"{describe(p)}. Fix: {fixes[kind]}", fix=fixes[kind],
                           where=f"{p['count']} of {total} input(s)",
                           details={"kind": kind, "rows": rows[:ROWS_KEPT], "inputs": total,
                                    "training_sample": sample,
                                    **{k: v for k, v in p.items() if k not in ("kind", "rows")}}))
    return out


#: the row numbers a train-serve-skew finding keeps (its count covers every row)
ROWS_KEPT = 1000


def _numbers(inputs: Sequence[Any], record: dict[str, Any] | None = None, offset: int = 0) -> torch.Tensor:
    from overt.preprocessing import numeric_matrix

    schema = (record or {}).get("schema") or {}
    shape = schema.get("shape")
    width = int(math.prod(shape)) if shape else None
    matrix = numeric_matrix(inputs, schema.get("features"), width, offset)
    x = torch.from_numpy(matrix.astype("float32"))
    return x.reshape(len(x), *shape) if shape else x


def load_run(run_dir: str | Path, quiet: bool = False, *, recipe: str | None = None, trust_recipe: bool = False,
             command: str = "overt predict", need_weights: bool = True) -> tuple[ModuleType, Any, dict[str, Any]]:
    """(recipe module, validated config, recipe meta) of a finished run.

    The recipe is code, and a run directory can come from anywhere: the one its ``config.yaml``
    names is imported only when it is built in, or when it is the file the run was trained with on
    this machine (:mod:`overt.recipes.trust`), or with the user's consent (``trust_recipe``, or
    ``recipe`` naming the file to use instead).  The file and its sha256 are printed on stderr
    (unless ``quiet``) before the import."""
    from overt.config import resolve
    from overt.errors import ConfigError
    from overt.recipes.base import load_recipe_module, recipe_defaults
    from overt.recipes.base import BUILTIN
    from overt.recipes.trust import authorize, explicit
    from overt.predict.runfiles import read_recipe_meta, read_recipe_source
    from overt.run.rundir import RunDir

    run = RunDir(run_dir)
    if not run.config.is_file():
        raise RunError(f"{run} is not a run directory (no config.yaml)",
                       fix="give the folder `overt train` wrote, e.g. runs/digits-20260101-120000")
    if need_weights and not run.weights.is_file():
        raise RunError(f"{run} holds no model.safetensors: the run did not finish",
                       why="only a finished run writes its final weights",
                       fix=f"finish it with `overt resume {run}`, or use a run that completed")
    values = read_run_config(run.config)
    named = str(values.get("recipe", "digits"))
    if recipe is not None:
        spec, notes = explicit(recipe)
    else:
        spec = named
        recorded = read_recipe_source(run.path) if spec not in BUILTIN else None  # read (and checked) when it decides
        notes = authorize(spec, recorded=recorded, trust=trust_recipe, command=command, run=str(run))
    for line in notes:  # before the import: what runs, and why overt lets it
        print(line, file=sys.stderr, flush=True)
    module = load_recipe_module(spec)
    if not quiet:
        print(f"overt: rebuilding the model with recipe {spec} ({getattr(module, '__file__', module.__name__)}), "
              f"as named in {run.config}", file=sys.stderr)
    defaults = recipe_defaults(module)
    values["recipe"] = spec
    try:
        cfg = resolve(defaults, {**defaults, **values}, source=str(run.config))
    except ConfigError as exc:
        raise RunError(f"the recipe {spec} does not accept this run's config", where=str(exc).split("\n")[0],
                       why="the config was edited after training, or the recipe changed since",
                       fix="restore config.yaml as training wrote it, or use the recipe version that trained the "
                           "run") from None
    meta = read_recipe_meta(run.recipe_meta)
    return module, cfg, meta


def read_run_config(path: Path) -> dict[str, Any]:
    """A run's ``config.yaml`` as a dict, or :class:`RunError` saying what is wrong with it."""
    from overt.run.reader import read_config

    try:
        values = read_config(path)
    except OvertError:
        raise
    except Exception as exc:  # unreadable, not YAML, not UTF-8
        raise RunError(f"{path} cannot be read: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                       why="the model is rebuilt from the run's config",
                       fix="restore config.yaml as `overt train` wrote it") from None
    if not isinstance(values, dict) or not values:
        raise RunError(f"{path} does not hold the run's settings (a YAML mapping naming its recipe)",
                       fix="restore config.yaml as `overt train` wrote it")
    return values


def weights_for(run_dir: str | Path, which: str = "final", log: Callable[[str], None] | None = None) -> Path | None:
    """The weights ``--checkpoint`` names: ``final`` -> None (the run's ``model.safetensors``); ``last`` ->
    the newest checkpoint that verifies; ``best`` -> the checkpoint with the best value of the run's
    monitored metric (``monitor``/``monitor_mode`` in its config) among those that verify.  Says on
    stderr (``log``) which checkpoint it is."""
    import math

    from overt.checkpoint.codec import CheckpointError
    from overt.checkpoint.store import list_checkpoints, read_newest_valid, verify_and_read
    from overt.run.rundir import RunDir

    say = log or (lambda message: print(message, file=sys.stderr))
    if which == "final":
        return None
    if which not in ("best", "last"):
        raise RunError(f"--checkpoint {which!r} is not final, best or last", fix="use final, best or last")
    run = RunDir(run_dir)
    root = run.checkpoints
    if not run.config.is_file():
        raise RunError(f"{run} is not a run directory (no config.yaml)",
                       fix="give the folder `overt train` wrote, e.g. runs/digits-20260101-120000")
    if not root.is_dir() or not list_checkpoints(root):
        raise RunError(f"{run} holds no checkpoints, so there is no {which} checkpoint",
                       why="checkpoints are written during training when checkpoint=true (the default)",
                       fix="use --checkpoint final (the run's model.safetensors)")
    if which == "last":
        try:
            loaded = read_newest_valid(root, log=say)
        except CheckpointError as exc:
            raise RunError(exc.what, where=exc.where, fix="use --checkpoint final") from None
        say(f"overt: weights from {loaded.path} (the newest valid checkpoint, step {loaded.step})")
        return loaded.path
    cfg = read_run_config(run.config)
    monitor, mode = str(cfg.get("monitor") or "val/loss"), str(cfg.get("monitor_mode") or "min")
    entries = list_checkpoints(root)
    damaged = [e for e in entries if e.problem is not None]
    for entry in damaged:  # named, as --checkpoint last names them: its metric is unknown, so it cannot be ranked
        try:
            verify_and_read(entry.path)
            reason = entry.problem
        except CheckpointError as exc:
            reason = exc.what
        say(f"overt: checkpoint {entry.path} is unusable: {reason}; it is left out of the choice of the best "
            f"(its {monitor} cannot be read)")
    scored = [e for e in entries if e.metric is not None and math.isfinite(e.metric)]
    if not scored:
        raise RunError(f"no checkpoint of {run} records a value of its monitored metric {monitor}",
                       why="the best checkpoint is chosen by that value (saved at each epoch's validation)",
                       fix="use --checkpoint last or final")
    scored.sort(key=lambda e: (-e.metric if mode == "max" else e.metric, -e.step))  # type: ignore[operator]
    for entry in scored:
        try:
            verify_and_read(entry.path)
        except CheckpointError as exc:
            say(f"overt: checkpoint {entry.path} is unusable: {exc.what}; trying the next best")
            continue
        left_out = f"; {len(damaged)} unusable one(s) left out" if damaged else ""
        say(f"overt: weights from {entry.path} (the best {monitor} among {len(scored)} checkpoint(s): "
            f"{entry.metric:.6g}, {mode}{left_out})")
        return entry.path
    raise RunError(f"no checkpoint of {run} with a value of {monitor} verifies", fix="use --checkpoint final")
