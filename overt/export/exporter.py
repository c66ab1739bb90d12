"""Export a finished run's model and prove the export computes what the eager model computes.

The parity check runs real validation inputs -- the first ``samples`` of the
recipe's validation split, prepared exactly as in training -- through the
eager model and through the exported one (onnxruntime for ONNX, the reloaded
``ExportedProgram`` for ``.pt2``) and reports the largest absolute difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from overt.errors import OvertError

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

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.atol


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


def _export_onnx(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> Any:
    import onnxruntime

    names = [f"input_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, inputs, str(path), input_names=names, output_names=["output"],
                      dynamic_shapes=_dynamic_shapes(inputs), dynamo=True, verbose=False)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
    return torch.from_numpy(session.run(None, feed)[0])


def _export_pt2(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> Any:
    program = torch.export.export(model, inputs, dynamic_shapes=_dynamic_shapes(inputs))
    torch.export.save(program, str(path))
    reloaded = torch.export.load(str(path))
    with torch.inference_mode():
        return reloaded.module()(*inputs)


def export_run(run_dir: str | Path, fmt: str = "onnx", out: str | Path | None = None, *, samples: int = 64,
               atol: float = 1e-4, quiet: bool = False, recipe: str | None = None,
               trust_recipe: bool = False) -> ExportResult:
    """Export the model of the finished run ``run_dir`` to ``out`` (default ``RUN_DIR/model.onnx`` or
    ``model.pt2``) and compare it with the eager model on ``samples`` validation inputs."""
    from overt.predict.predictor import Predictor

    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}", fix=f"use one of: {', '.join(FORMATS)}")
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise ExportError(f"ONNX export needs {exc.name}, which is not installed",
                              fix='pip install "overt[export]"  (onnx, onnxruntime, onnxscript)') from None
    predictor = Predictor.from_run(run_dir, device="cpu", quiet=quiet, recipe=recipe, trust_recipe=trust_recipe,
                                   command="overt export")
    model = predictor.model.eval()
    inputs = validation_inputs(predictor, samples)
    path = Path(out) if out is not None else Path(run_dir) / f"model.{fmt}"
    with torch.inference_mode():
        eager = model(*inputs)
    try:
        exported = _export_onnx(model, inputs, path) if fmt == "onnx" else _export_pt2(model, inputs, path)
    except OvertError:
        raise
    except Exception as exc:
        raise ExportError(f"exporting {type(model).__name__} to {fmt} failed: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}",
                          fix="see the exporter's message; the model's forward must be traceable") from exc
    diff = float((exported.float() - eager.float()).abs().max()) if eager.numel() else 0.0
    return ExportResult(path=path, format=fmt, max_abs_diff=diff, samples=int(inputs[0].shape[0]), atol=atol)
