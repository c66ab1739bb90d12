"""Serving an exported model with its preprocessing: no re-implementation in the serving code.

``overt export`` writes, beside ``model.onnx`` (or ``model.pt2``), ``model.onnx.serving.json``
(``model.pt2.serving.json``): the
run's declared preprocessing (:class:`overt.Preprocessing`), the record of what the model was
trained on (:mod:`overt.record`) and how answers are read.  :func:`load_exported` puts them
back together::

    from overt.serving import load_exported

    model = load_exported("runs/digits-.../model.onnx")      # onnxruntime, numpy; torch not needed
    model.predict(load_digits().data[:2])                    # raw rows in, answers out
    # [{'class': 0, 'label': '0', 'probability': 0.99, 'top': [...]}, ...]
    model.check(rows)                                        # train-serve-skew problems, if any

ONNX needs ``onnxruntime`` (``pip install "overt[export]"``); a ``.pt2`` program needs torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from overt.errors import OvertError
from overt.preprocessing import Preprocessing, answers

SUFFIX = ".serving.json"


class ServingError(OvertError):
    """An exported model, or the serving JSON beside it, that cannot be served."""


def serving_path(model_path: str | Path) -> Path:
    """Where the serving JSON of an exported model lives: ``model.onnx`` -> ``model.onnx.serving.json``
    (one per exported file, so an ONNX and a pt2 export of the same run sit side by side)."""
    path = Path(model_path)
    return path.with_name(path.name + SUFFIX)


def legacy_serving_path(model_path: str | Path) -> Path:
    """Where an older overt wrote it: ``model.onnx`` -> ``model.serving.json`` (shared by both formats)."""
    path = Path(model_path)
    return path.with_name(path.stem + SUFFIX)


class ExportedModel:
    """An exported model and its preprocessing: raw inputs in, the same answers as ``overt predict`` out."""

    def __init__(self, model_path: str | Path, spec: dict[str, Any], source: str | Path | None = None):
        self.path = Path(model_path)
        self.spec = check_spec(spec, self.path, source or serving_path(self.path))
        prep = spec.get("preprocessing")
        where = str(source or serving_path(self.path))
        self.preprocessing = Preprocessing.from_dict(prep, where, "preprocessing") if prep is not None else None
        self.record = spec.get("inputs") or {}
        self.format = spec.get("format") or self.path.suffix.lstrip(".")
        try:
            if self.format == "onnx":
                try:
                    import onnxruntime
                except ImportError:
                    raise ServingError("serving an ONNX model needs onnxruntime, which is not installed",
                                       fix='pip install onnxruntime  (or "overt[export]")') from None
                self._session = onnxruntime.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
            else:
                import torch

                self._program = torch.export.load(str(self.path)).module()
        except OvertError:
            raise
        except Exception as exc:  # a damaged file, a missing .onnx.data, a file of the other format
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            data = self.path.with_name(self.path.name + ".data")
            hint = (f"; its weights file {data.name} is missing beside it" if self.format == "onnx"
                    and "data" in first.lower() and not data.is_file() else "")
            raise ServingError(f"{self.path} cannot be loaded as a {self.format} model{hint}: "
                               f"{type(exc).__name__}: {first}",
                               why="the exported file is damaged, incomplete, or not the format its serving JSON "
                                   "names",
                               fix="copy every file overt export listed, or export the model again") from None

    def prepare(self, inputs: Sequence[Any]) -> np.ndarray:
        """Raw inputs -> the model's input batch, with the run's declared preprocessing."""
        if self.preprocessing is None:
            return np.asarray(inputs, dtype=np.float32)
        return self.preprocessing(inputs)

    def outputs(self, inputs: Sequence[Any]) -> np.ndarray:
        """The exported model's raw outputs (logits for a classifier) for raw inputs."""
        batch = self.prepare(inputs)
        if self.format == "onnx":
            name = self._session.get_inputs()[0].name
            return np.asarray(self._session.run(None, {name: batch})[0])
        import torch

        with torch.inference_mode():
            return self._program(torch.from_numpy(np.ascontiguousarray(batch))).float().numpy()

    def predict(self, inputs: Sequence[Any], *, top_k: int = 3, raw: bool = False) -> list[dict[str, Any]]:
        """One answer per raw input, as ``overt predict`` gives it (``raw``: the outputs themselves)."""
        out = self.outputs(inputs)
        if self.preprocessing is not None:
            return self.preprocessing.answer(out, top_k=top_k, raw=raw)
        classes = self.record.get("classes")
        task = "classification" if classes and out.ndim == 2 and out.shape[1] == classes.get("count") else "raw"
        return answers(out, task, labels=(classes or {}).get("names"), top_k=top_k, raw=raw)

    def check(self, inputs: Sequence[Any]) -> list[dict[str, Any]]:
        """``train-serve-skew`` problems of these raw inputs against the training record (empty: none)."""
        from overt.record import check_inputs

        return check_inputs(self.prepare(inputs), self.record)


def check_spec(spec: Any, model_path: Path, source: str | Path) -> dict[str, Any]:
    """The serving JSON ``spec`` checked against its schema and against the model file it sits beside;
    else a :class:`ServingError`/``SchemaError`` naming the file and the field."""
    from overt.errors import schema_error
    from overt.record import validate_record

    problem = None
    if not isinstance(spec, dict):
        problem = f"it holds a JSON {type(spec).__name__}, not an object"
    elif spec.get("format") not in (None, "onnx", "pt2"):
        problem = f"format {str(spec.get('format'))[:40]!r} is not onnx or pt2"
    elif spec.get("preprocessing") is not None and not isinstance(spec["preprocessing"], dict):
        problem = "preprocessing is not an object"
    elif spec.get("model") is not None and not isinstance(spec["model"], str):
        problem = "model is not a file name"
    if problem:
        raise schema_error(source, ValueError(problem), fix="export the model again")
    suffix = model_path.suffix[1:] if model_path.suffix in (".onnx", ".pt2") else None
    if spec.get("model") not in (None, model_path.name) or spec.get("format") not in (None, suffix or spec["format"]):
        raise ServingError(f"{source} describes {spec.get('model')} ({spec.get('format')}), not {model_path.name}",
                           why="an export of another format wrote its serving JSON over this one (an older overt "
                               "used one model.serving.json for both); its preprocessing may not be this "
                               "model's",
                           fix=f"export {model_path.name} again: `overt export RUN_DIR --format "
                               f"{model_path.suffix[1:]} --out {model_path}` writes {serving_path(model_path).name}")
    if spec.get("inputs") is not None:
        validate_record(spec["inputs"], f"{source} (inputs)")
    return spec


def load_exported(model_path: str | Path) -> ExportedModel:
    """An exported model (``.onnx`` or ``.pt2``) with the preprocessing ``overt export`` wrote beside it.
    Every problem is a :class:`ServingError` (or a ``SchemaError``, both :class:`OvertError`) saying what
    is wrong and the fix: a missing or damaged serving JSON, a missing model file, a damaged model."""
    path = Path(model_path)
    spec_path = serving_path(path)
    if not spec_path.is_file() and legacy_serving_path(path).is_file():
        spec_path = legacy_serving_path(path)  # an export by an older overt: checked to describe this model
    try:
        text = spec_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ServingError(f"{serving_path(path)} is missing: the exported model has no preprocessing beside it",
                           fix=f"export it again with `overt export RUN_DIR --out {path}`") from None
    except (OSError, ValueError) as exc:
        raise ServingError(f"{spec_path} cannot be read: {exc}", fix="export the model again") from None
    try:
        spec = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ServingError(f"{spec_path} is not JSON: {str(exc).splitlines()[0][:100]}",
                           fix="export the model again") from None
    if not path.is_file():
        raise ServingError(f"exported model {path} does not exist", fix="check the path, or export it again")
    return ExportedModel(path, spec, spec_path)
