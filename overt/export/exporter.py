"""Export a finished run's model and prove the export computes what the eager model computes.

The parity check runs real validation inputs -- the first ``samples`` of the
recipe's validation split, prepared exactly as in training -- through the
eager model and through the exported one (onnxruntime for ONNX, the reloaded
``ExportedProgram`` for ``.pt2``) and reports the largest absolute difference.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch

import numpy as np

from overt.errors import OvertError
from overt.run.atomic import atomic_path
from overt.run.rundir import RunDir
from overt.serving import SUFFIX, serving_path

FORMATS = ("onnx", "pt2")


class ExportError(OvertError):
    """An export that failed or does not match the eager model."""


@dataclass
class ExportResult:
    """Where the export was written and how closely it matches the eager model."""

    path: Path
    format: str
    max_abs_diff: float
    samples: int
    atol: float
    raw: bool = False  # parity checked on raw inputs through the declared preprocessing
    same_answers: bool | None = None  # served answers (class, probability...) equal predict's
    files: list[Path] = field(default_factory=list)  # every file written: copy them all to serve the model

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.atol and self.same_answers is not False


def validation_inputs(predictor: Any, samples: int) -> tuple[torch.Tensor, ...]:
    """The model's positional inputs for the first ``samples`` validation samples of the run's recipe
    (the training split when the recipe has none).  Builds the recipe, so its data must be reachable."""
    from torch.utils.data import DataLoader

    from overt.recipes.base import build_recipe

    module = predictor.module
    recipe = build_recipe(module, predictor.config)
    data = recipe.val_data if recipe.val_data is not None else recipe.train_data
    if not isinstance(data, DataLoader):
        data = DataLoader(data, batch_size=samples, shuffle=False, collate_fn=recipe.collate_fn)
    loader = data
    batch = next(iter(loader))
    if hasattr(module, "model_inputs"):
        inputs = tuple(module.model_inputs(batch))
    elif isinstance(batch, (tuple, list)):
        inputs = (batch[0],)
    else:
        inputs = (batch,)
    return tuple(t[:samples] for t in inputs)


def _dynamic_shapes(inputs: tuple[torch.Tensor, ...]) -> tuple[dict[int, Any], ...]:
    """Batch dimension dynamic for every input; the sequence dimension too for integer (token) inputs."""
    auto = torch.export.Dim.AUTO
    return tuple({0: auto, **({1: auto} if not t.is_floating_point() and t.dim() > 1 else {})} for t in inputs)


#: an ONNX file holds at most 2 GB (protobuf); larger weights go to ``NAME.onnx.data`` beside it
ONNX_INLINE_MAX = 1 << 30


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporters' own chatter (torch.onnx's "torchvision is not installed" lines, FutureWarnings
    from their internals) is not about the user's model: silenced while they run; errors still raise."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "torch._export", "onnxscript")]
    levels = [logger.level for logger in loggers]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for logger in loggers:
                logger.setLevel(logging.ERROR)
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _onnx_external(model: torch.nn.Module) -> bool:
    """Whether the ONNX export keeps its weights in ``NAME.onnx.data`` (too large for one file)."""
    return sum(t.numel() * t.element_size() for t in model.state_dict().values()) > ONNX_INLINE_MAX


def _export_onnx(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> Any:
    import onnxruntime

    names = [f"input_{i}" for i in range(len(inputs))]
    with _quiet_exporter():
        torch.onnx.export(model, inputs, str(path), input_names=names, output_names=["output"],
                          dynamic_shapes=_dynamic_shapes(inputs), dynamo=True, verbose=False,
                          external_data=_onnx_external(model))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
    return torch.from_numpy(session.run(None, feed)[0])


def _export_pt2(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> Any:
    with _quiet_exporter():
        program = torch.export.export(model, inputs, dynamic_shapes=_dynamic_shapes(inputs))
        torch.export.save(program, str(path))
        reloaded = torch.export.load(str(path))
    with torch.inference_mode():
        return reloaded.module()(*inputs)


def _check_out(path: Path, run_dir: Path, fmt: str) -> None:
    """Refuse an output path that would overwrite the run's own files (its weights, config, records),
    or that lies in a folder that does not exist."""
    if not path.parent.is_dir():
        raise ExportError(f"--out {path}: the folder {path.parent} does not exist",
                          why="overt export writes the model and its serving JSON into an existing folder; it does "
                              "not create folders a typo could name",
                          fix=f"create it first (mkdir -p {shlex.quote(str(path.parent))}), or give --out a path in "
                              "an existing folder")
    target = path.resolve()
    run = run_dir.resolve()
    allowed = {f"model.{f}" for f in FORMATS} | {f"model.{f}{SUFFIX}" for f in FORMATS} | {"model.onnx.data"} \
        | {f"model{SUFFIX}"}
    inside = target.parent == run and target.name not in allowed
    if inside or RunDir(run).checkpoints in target.parents or target.is_dir():
        raise ExportError(f"--out {path} would overwrite {'a folder' if target.is_dir() else 'a file of the run'}",
                          where=str(target),
                          why="the run's weights, config and records are what predict, resume and the parity check "
                              "read; an export written over them destroys the trained model",
                          fix=f"write the export elsewhere, or leave --out out (RUN_DIR/model.{fmt})")


def export_run(run_dir: str | Path, fmt: str = "onnx", out: str | Path | None = None, *, samples: int = 64,
               atol: float = 1e-4, quiet: bool = False, recipe: str | None = None,
               trust_recipe: bool = False, checkpoint: str = "final") -> ExportResult:
    """Export the model of the finished run ``run_dir`` to ``out`` (default ``RUN_DIR/model.onnx`` or
    ``model.pt2``) with its preprocessing and input record beside it (``model.serving.json``, read by
    :func:`overt.serving.load_exported`), and compare it with the eager model: on ``samples`` raw
    validation inputs through the declared preprocessing when the recipe gives them (answers must be
    identical too), else on prepared validation inputs.  ``checkpoint``: final, best or last."""
    from overt.predict.predictor import Predictor, weights_for

    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}", fix=f"use one of: {', '.join(FORMATS)}")
    if not isinstance(samples, int) or samples < 1:
        raise ExportError(f"--samples {samples!r}: the parity check needs at least one sample",
                          fix="give --samples 1 or more (default 64)")
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise ExportError(f"ONNX export needs {exc.name}, which is not installed",
                              fix='pip install "overt[export]"  (onnx, onnxruntime, onnxscript)') from None
    run = RunDir(run_dir)
    path = Path(out) if out is not None else run.export(fmt)
    _check_out(path, run.path, fmt)
    if Path(os.path.abspath(run.path)) in Path(os.path.abspath(path)).parents:
        RunDir(os.path.abspath(run.path)).inside(os.path.abspath(path))  # no linked folder on the way
    weights = weights_for(run_dir, checkpoint, log=None if not quiet else (lambda message: None))
    predictor = Predictor.from_run(run_dir, device="cpu", quiet=quiet, recipe=recipe, trust_recipe=trust_recipe,
                                   command="overt export", weights=weights)
    model = predictor.model.eval()
    raw = raw_validation(predictor, samples)
    inputs = (predictor.prepare(raw),) if raw is not None else validation_inputs(predictor, samples)
    with torch.inference_mode():
        eager = model(*inputs)
    try:
        with atomic_path(path) as tmp:  # written beside, then renamed: a link planted at path is replaced, not followed
            exported = _export_onnx(model, inputs, tmp) if fmt == "onnx" else _export_pt2(model, inputs, tmp)
    except OvertError:
        raise
    except OSError as exc:
        raise ExportError(f"cannot write the export {path}: {exc.strerror or exc}",
                          fix="give --out a writable path on a disk with room") from None
    except Exception as exc:
        raise ExportError(f"exporting {type(model).__name__} to {fmt} failed: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}",
                          fix="see the exporter's message; the model's forward must be traceable") from exc
    diff = float((exported.float() - eager.float()).abs().max()) if eager.numel() else 0.0
    spec = write_serving_spec(path, fmt, predictor)
    same_answers = None
    if raw is not None:  # the served path end to end: raw inputs -> the JSON's preprocessing -> export -> answers
        from overt.serving import ExportedModel

        served = ExportedModel(path, spec)
        diff = max(diff, float(np.abs(served.outputs(raw) - eager.float().numpy()).max()))
        same_answers = same(served.predict(raw), predictor.answer(eager), max(atol, 1e-6))
    files = [path] + ([path.with_name(path.name + ".data")] if fmt == "onnx" and _onnx_external(model) else [])
    return ExportResult(path=path, format=fmt, max_abs_diff=diff, samples=int(inputs[0].shape[0]), atol=atol,
                        raw=raw is not None, same_answers=same_answers, files=files + [serving_path(path)])


def same(a: Any, b: Any, atol: float) -> bool:
    """Answers equal: classes, labels and keys exactly, numbers within ``atol`` (plus float32's relative
    precision, for answers in a target's units)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], atol) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, atol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) <= atol + 1e-6 * max(abs(a), abs(b))
    return a == b


def raw_validation(predictor: Any, samples: int) -> list[Any] | None:
    """The first ``samples`` raw validation inputs the recipe gives (``Recipe.raw_val``), when it declares
    its preprocessing; else None."""
    from overt.recipes.base import build_recipe

    if predictor.preparation is None:
        return None
    recipe = build_recipe(predictor.module, predictor.config)
    if recipe.raw_val is None or not len(recipe.raw_val):
        return None
    return list(recipe.raw_val[:samples])


def write_serving_spec(path: Path, fmt: str, predictor: Any) -> dict[str, Any]:
    """``model.serving.json`` beside the export: the preprocessing, the input record, the answers' form."""
    import overt
    from overt.run.atomic import write_text_atomic
    from overt.run.layout import json_safe

    record = {k: v for k, v in predictor.record.items() if k != "preprocessing"}
    prep = predictor.preparation.to_dict() if predictor.preparation is not None else None
    spec = {"format": fmt, "model": path.name, "overt": overt.__version__, "preprocessing": prep, "inputs": record}
    write_text_atomic(serving_path(path), json.dumps(json_safe(spec)) + "\n")
    return spec
