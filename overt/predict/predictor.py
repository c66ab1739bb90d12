"""``Predictor``: a finished run's model, rebuilt from the run's own config and recipe, ready for inputs.

Safety: the only code imported is the recipe named in the run's ``config.yaml``
(the file that trained it; its path is printed), and the weights are read from
``model.safetensors`` with safetensors -- nothing is ever unpickled.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

import torch
from torch import nn

from overt.errors import OvertError


class RunError(OvertError):
    """A run directory that cannot be used for prediction or export."""


class Predictor:
    """Runs ``model`` on raw inputs in batches, under ``eval()`` and ``torch.inference_mode()``.

    ``preprocess(inputs, meta)`` turns a list of raw inputs into the model's
    input; ``postprocess(output, meta)`` turns the output into one JSON-ready
    value per input; ``predict_fn(model, inputs, meta)`` replaces both (for
    outputs that are not one forward pass, such as sampled text).  Without
    them, inputs are rows of numbers and outputs rows of numbers.

    Usually made with :meth:`from_run`::

        predictor = overt.Predictor.from_run("runs/sentiment-20260101-120000")
        predictor.predict(["what a great phone", "never again"])
        # [{'label': 'positive', 'class': 1, 'probability': 0.97}, {'label': 'negative', ...}]
    """

    def __init__(self, model: nn.Module, *, preprocess: Callable[[list[Any], dict[str, Any]], Any] | None = None,
                 postprocess: Callable[[Any, dict[str, Any]], list[Any]] | None = None,
                 predict_fn: Callable[[nn.Module, list[Any], dict[str, Any]], list[Any]] | None = None,
                 meta: dict[str, Any] | None = None, device: str | torch.device = "cpu", batch_size: int = 256,
                 module: ModuleType | None = None, config: Any = None):
        from overt.engine.device import pick_device

        self.device = pick_device(str(device))
        self.model = model.to(self.device).eval()
        self.preprocess, self.postprocess, self.predict_fn = preprocess, postprocess, predict_fn
        self.meta = dict(meta or {})
        self.batch_size = batch_size
        self.module, self.config = module, config

    @classmethod
    def from_run(cls, run_dir: str | Path, *, device: str = "auto", batch_size: int = 256,
                 quiet: bool = False, recipe: str | None = None, trust_recipe: bool = False,
                 command: str = "overt predict") -> Predictor:
        """Rebuild the model of the finished run in ``run_dir`` from its ``config.yaml`` and recipe,
        load ``model.safetensors`` strictly, and use the recipe's ``preprocess``/``postprocess``
        (or ``predict``) when it defines them.  Unless ``quiet``, one line on stderr names the recipe file
        imported.  A recipe that is not built in is imported only when this machine trained the run with
        it, or with ``trust_recipe`` / ``recipe=FILE`` (see :func:`load_run`)."""
        from overt.checkpoint.weights import load_weights
        from overt.recipes.base import build_recipe

        module, cfg, meta = load_run(run_dir, quiet, recipe=recipe, trust_recipe=trust_recipe, command=command)
        build_model = getattr(module, "build_model", None)
        if build_model is not None:
            model = build_model(cfg, meta)
        else:  # a recipe without build_model: build it whole (this loads its data)
            model = build_recipe(module, cfg).model
        from overt.run.rundir import WEIGHTS

        load_weights(model, Path(run_dir) / WEIGHTS, strict=True)
        return cls(model, preprocess=getattr(module, "preprocess", None),
                   postprocess=getattr(module, "postprocess", None), predict_fn=getattr(module, "predict", None),
                   meta=meta, device=device, batch_size=batch_size, module=module, config=cfg)

    def run_batch(self, inputs: Any) -> Any:
        """The model on one prepared batch (a tensor or a tuple of them), on the predictor's device."""
        from overt.engine.device import move_to_device

        inputs = move_to_device(inputs, self.device)
        with torch.inference_mode():
            return self.model(*inputs) if isinstance(inputs, tuple) else self.model(inputs)

    def predict(self, inputs: Sequence[Any]) -> list[Any]:
        """One JSON-ready prediction per raw input, computed ``batch_size`` inputs at a time."""
        inputs = list(inputs)
        if self.predict_fn is not None:
            with torch.inference_mode():
                return list(self.predict_fn(self.model, inputs, self.meta))
        results: list[Any] = []
        for start in range(0, len(inputs), self.batch_size):
            chunk = inputs[start:start + self.batch_size]
            batch = self.preprocess(chunk, self.meta) if self.preprocess is not None else _numbers(chunk)
            output = self.run_batch(batch)
            output = output.detach().cpu() if isinstance(output, torch.Tensor) else output
            results += (self.postprocess(output, self.meta) if self.postprocess is not None
                        else [{"output": row} for row in output.tolist()])
        return results

    __call__ = predict


def _numbers(inputs: list[Any]) -> torch.Tensor:
    from overt.recipes.common import numeric_rows

    return numeric_rows(inputs)


def load_run(run_dir: str | Path, quiet: bool = False, *, recipe: str | None = None,
             trust_recipe: bool = False, command: str = "overt predict") -> tuple[ModuleType, Any, dict[str, Any]]:
    """(recipe module, validated config, recipe meta) of a finished run.

    The recipe is code, and a run directory can come from anywhere: the one its ``config.yaml``
    names is imported only when it is built in, or when it is the file the run was trained with on
    this machine (:mod:`overt.recipes.trust`), or with the user's consent (``trust_recipe``, or
    ``recipe`` naming the file to use instead).  The file and its sha256 are printed on stderr
    (unless ``quiet``) before the import."""
    from overt.config import resolve
    from overt.errors import ConfigError
    from overt.recipes.base import load_recipe_module, recipe_defaults
    from overt.recipes.trust import authorize, explicit
    from overt.run.reader import read_json
    from overt.run.rundir import CONFIG, RECIPE_META, RECIPE_SOURCE, WEIGHTS

    run = Path(run_dir)
    if not (run / CONFIG).is_file():
        raise RunError(f"{run} is not a run directory (no config.yaml)",
                       fix="give the folder `overt train` wrote, e.g. runs/digits-20260101-120000")
    if not (run / WEIGHTS).is_file():
        raise RunError(f"{run} holds no model.safetensors: the run did not finish",
                       why="only a finished run writes its final weights",
                       fix=f"finish it with `overt resume {run}`, or use a run that completed")
    values = read_run_config(run / CONFIG)
    named = str(values.get("recipe", "digits"))
    if recipe is not None:
        spec, notes = explicit(recipe)
    else:
        spec = named
        recorded = read_json(run / RECIPE_SOURCE)
        notes = authorize(spec, recorded=recorded if isinstance(recorded, dict) else None, trust=trust_recipe,
                          command=command, run=str(run))
    for line in notes:  # before the import: what runs, and why overt lets it
        print(line, file=sys.stderr, flush=True)
    module = load_recipe_module(spec)
    if not quiet:
        print(f"overt: rebuilding the model with recipe {spec} ({getattr(module, '__file__', module.__name__)}), "
              f"as named in {run / CONFIG}", file=sys.stderr)
    defaults = recipe_defaults(module)
    values["recipe"] = spec
    try:
        cfg = resolve(defaults, {**defaults, **values}, source=str(run / CONFIG))
    except ConfigError as exc:
        raise RunError(f"the recipe {spec} no longer accepts this run's config", where=str(exc).split("\n")[0],
                       fix="use the recipe version that trained the run") from None
    meta = read_json(run / RECIPE_META)
    return module, cfg, meta if isinstance(meta, dict) else {}


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
    if not isinstance(values, dict):
        raise RunError(f"{path} does not hold a mapping of settings", fix="restore config.yaml as overt wrote it")
    return values
