"""The run directory's layout, in one place: every file's name, the checkpoint folders' names,
and how the run's JSON files are written (atomically, as strict JSON).

::

    RUN_DIR/
      config.yaml          the resolved config (written when training starts)
      recipe_meta.json     what prediction needs from the training split (a recipe's ``meta``)
      inputs.json          what the model was trained on (schema, statistics, preprocessing, classes)
      recipe_source.json   which recipe file (and its sha256) trained the run
      metrics.jsonl        one JSON object per logged point and per epoch
      tb/                  TensorBoard event files (``tensorboard=true``)
      status.json          running / failed / interrupted, with the error
      guards.json          the runtime guards' findings
      checkpoints/step-NNNNNN/   atomic, verified checkpoints (see overt.checkpoint.store)
      model.safetensors    the final weights        } only when training
      summary.json         what the run did          } finished
      .lock                held by the process training the run (overt.run.lock)
      report/ plots/ wandb/ mlflow.json   overt report, plots=true, W&B and MLflow

Every writer and reader of a run directory takes its names from here (through
:class:`overt.run.rundir.RunDir` outside ``overt/run/``); JSON goes through
:func:`write_json` (strict JSON: non-finite floats become the strings ``"nan"``, ``"inf"``,
``"-inf"``, see :func:`json_safe`).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Callable

CONFIG = "config.yaml"
RECIPE_META = "recipe_meta.json"
INPUTS = "inputs.json"  # what the model was trained on: schema, statistics, preprocessing, classes (overt.record)
RECIPE_SOURCE = "recipe_source.json"  # {"spec", "file", "sha256"} of the recipe that trained the run
METRICS = "metrics.jsonl"
TENSORBOARD = "tb"
STATUS = "status.json"
GUARDS = "guards.json"
CHECKPOINTS = "checkpoints"
WEIGHTS = "model.safetensors"
SUMMARY = "summary.json"
REPORT = "report"  # overt report of this run (its default --out)
PLOTS = "plots"  # plots=true
WANDB = "wandb"  # W&B's own files (wandb=true)
MLFLOW = "mlflow.json"  # the MLflow run of this run (mlflow=true)

#: a checkpoint folder: ``step-`` and the optimizer step, zero-padded to six digits
CHECKPOINT_NAME = re.compile(r"^step-(\d+)$")
#: prefixes of a checkpoint being written or deleted (hidden, cleaned up when left behind)
CHECKPOINT_TEMP_PREFIXES = (".tmp-step-", ".trash-step-")


def checkpoint_name(step: int) -> str:
    """The folder name of the checkpoint taken after optimizer step ``step``."""
    return f"step-{step:06d}"


def checkpoint_step(name: str) -> int | None:
    """The step of a checkpoint folder's name (``step-000120`` -> 120); None for any other name."""
    match = CHECKPOINT_NAME.match(name)
    return int(match.group(1)) if match else None


def checkpoints_dir(run_dir: str | Path) -> Path:
    """``RUN_DIR/checkpoints``."""
    return Path(run_dir) / CHECKPOINTS


def checkpoint_root(path: str | Path) -> Path:
    """Where a path's checkpoint folders are: ``path/checkpoints`` for a run directory that has
    them, else ``path`` itself (a ``checkpoints`` folder given directly)."""
    path = Path(path)
    return checkpoints_dir(path) if checkpoints_dir(path).is_dir() else path


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as the strings ``"nan"``, ``"inf"``, ``"-inf"``: strict JSON
    has no NaN, and a bare ``NaN`` token makes the whole file unreadable to other tools
    (``float("nan")`` reads them back).  Keys that are not strings become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


#: how the run's JSON files spell non-finite floats, and the values they read back as
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def dumps_json(value: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = str) -> str:
    """``value`` as strict JSON text (see :func:`json_safe`) and a newline (one line when ``indent`` is None)."""
    return json.dumps(json_safe(value), indent=indent, default=default, allow_nan=False) + "\n"


def write_json(path: str | Path, value: Any, *, indent: int | None = 2,
               default: Callable[[Any], Any] | None = str) -> None:
    """Write ``value`` to ``path`` as strict JSON, atomically (a reader sees the old file or the new one)."""
    from overt.run.atomic import write_text_atomic

    write_text_atomic(path, dumps_json(value, indent=indent, default=default))
