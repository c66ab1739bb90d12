"""Serving an exported model with its preprocessing: no re-implementation in the serving code.

``overt export`` writes, beside ``model.onnx`` (or ``model.pt2``), ``model.serving.json``: the
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


def serving_path(model_path: str | Path) -> Path:
    """Where the serving JSON of an exported model lives: ``model.onnx`` -> ``model.serving.json``."""
    path = Path(model_path)
    return path.with_name(path.stem + SUFFIX)


class ExportedModel:
    """An exported model and its preprocessing: raw inputs in, the same answers as ``overt predict`` out."""

    def __init__(self, model_path: str | Path, spec: dict[str, Any]):
        self.path = Path(model_path)
        self.spec = spec
        prep = spec.get("preprocessing")
        self.preprocessing = Preprocessing.from_dict(prep) if isinstance(prep, dict) else None
        self.record = spec.get("inputs") or {}
        self.format = spec.get("format") or self.path.suffix.lstrip(".")
        if self.format == "onnx":
            try:
                import onnxruntime
            except ImportError:
                raise OvertError("serving an ONNX model needs onnxruntime, which is not installed",
                                 fix='pip install onnxruntime  (or "overt[export]")') from None
            self._session = onnxruntime.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
        else:
            import torch

            self._program = torch.export.load(str(self.path)).module()

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


def load_exported(model_path: str | Path) -> ExportedModel:
    """An exported model (``.onnx`` or ``.pt2``) with the preprocessing ``overt export`` wrote beside it."""
    path = Path(model_path)
    spec_path = serving_path(path)
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OvertError(f"{spec_path} is missing: the exported model has no preprocessing beside it",
                         fix=f"export it again with `overt export RUN_DIR --out {path}`") from None
    except (OSError, ValueError) as exc:
        raise OvertError(f"{spec_path} cannot be read: {exc}", fix="export the model again") from None
    if not path.is_file():
        raise OvertError(f"exported model {path} does not exist", fix="check the path, or export it again")
    return ExportedModel(path, spec)
