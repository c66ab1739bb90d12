"""Preprocessing declared once: raw inputs -> the model's inputs, and the model's outputs -> answers.

A recipe declares its :class:`Preprocessing` (scaling, standardisation, column order, a
vocabulary, the image shape) and uses it to prepare its own training data; ``overt train``
saves it in the run directory, ``overt predict`` applies the same object to raw inputs, and
``overt export`` writes it beside the exported model, where :mod:`overt.serving` applies it
for ONNX Runtime.  One definition, nothing to copy, nothing to drift.

It is data, not code (a JSON object), so a run directory or an export carries it without
anything being imported, and it needs only numpy (no torch) to apply.

Examples::

    Preprocessing(width=64, scale=16.0)                       # digits: pixels 0..16 -> 0..1
    Preprocessing(width=784, scale=255 * std, shift=255 * mean, shape=[1, 28, 28])   # MNIST
    Preprocessing(features=["size", "age"], shift=[mean...], scale=[std...])        # named CSV columns
    Preprocessing(tokens={"vocab": [...], "split": "words", "max_len": 64})           # sentences -> ids
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from overt.errors import DataError

#: the largest text cell or line read as one input (characters)
MAX_TEXT = 100_000


@dataclass
class Preprocessing:
    """Raw inputs -> the model's input batch, and the model's output -> one answer per input.

    Numeric inputs: each raw input is ``width`` numbers (a list, an array of any shape with that
    many values, a CSV row, or a dict keyed by ``features``), computed as ``(x - shift) / scale``
    (scalars, or one value per feature) and reshaped to ``shape`` per input (default: a row).
    Text inputs (``tokens``): ``{"vocab": [...], "split": "words" | "chars", "lower": bool,
    "pattern": regex for words, "max_len": int, "pad": 0, "unk": 1}``: ids padded per batch.

    Outputs: ``task`` is ``"classification"`` (softmax over classes named ``labels``),
    ``"regression"`` (``target`` = ``{"name", "shift", "scale"}``: output * scale + shift, in
    the target's units) or ``"raw"`` (the model's numbers as they are)."""

    width: int | None = None
    features: list[str] | None = None
    shift: float | list[float] = 0.0
    scale: float | list[float] = 1.0
    shape: list[int] | None = None
    tokens: dict[str, Any] | None = None
    task: str = "raw"
    labels: list[str] | None = None
    target: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {}, [])}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preprocessing:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    # -- raw inputs -> model inputs ---------------------------------------------------------------
    @property
    def is_text(self) -> bool:
        return self.tokens is not None

    def n_features(self) -> int | None:
        if self.features:
            return len(self.features)
        if self.width:
            return int(self.width)
        return int(np.prod(self.shape)) if self.shape else None

    def numbers(self, inputs: Sequence[Any]) -> np.ndarray:
        """Raw numeric inputs as a float64 matrix (one row per input), schema-checked: every row has
        the expected width, every cell is a number, none is NaN or infinite (named by row and column)."""
        return numeric_matrix(inputs, self.features, self.n_features())

    def prepare_numbers(self, matrix: np.ndarray) -> np.ndarray:
        """A checked raw matrix -> the model's float32 input batch."""
        x = (matrix - np.asarray(self.shift, dtype=np.float64)) / np.asarray(self.scale, dtype=np.float64)
        x = x.astype(np.float32)
        return x.reshape((len(x), *self.shape)) if self.shape else x

    def ids(self, text: str) -> list[int]:
        """One text -> token ids (at most ``max_len``; the unknown id for words outside the vocabulary)."""
        spec = self.tokens or {}
        index = self._index()
        unk = int(spec.get("unk", 1))
        text = text.lower() if spec.get("lower", False) else text
        pieces = list(text) if spec.get("split") == "chars" else re.findall(spec.get("pattern", r"\S+"), text)
        ids = [index.get(p, unk) for p in pieces]
        limit = spec.get("max_len")
        return ids[:int(limit)] if limit else ids

    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_vocab_index")  # an attribute, not a field: never written to JSON
        if cached is None:
            cached = {token: i for i, token in enumerate((self.tokens or {}).get("vocab", []))}
            self.__dict__["_vocab_index"] = cached
        return cached

    def prepare_text(self, inputs: Sequence[Any]) -> np.ndarray:
        """Texts -> int64 ids, padded with the pad id to the longest (at least one id per text)."""
        spec = self.tokens or {}
        pad, unk = int(spec.get("pad", 0)), int(spec.get("unk", 1))
        rows = []
        for i, text in enumerate(inputs):
            if not isinstance(text, str):
                raise DataError(f"input {i} is not text: {short(text)}", fix="give one sentence per input (a line)")
            rows.append(self.ids(text) or [unk])
        longest = max((len(r) for r in rows), default=0)
        out = np.full((len(rows), longest), pad, dtype=np.int64)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out

    def __call__(self, inputs: Sequence[Any]) -> np.ndarray:
        """Raw inputs -> the model's input batch (numpy)."""
        if self.is_text:
            return self.prepare_text(inputs)
        return self.prepare_numbers(self.numbers(inputs))

    def tensor(self, inputs: Sequence[Any]) -> Any:
        """Raw inputs -> the model's input batch as a torch tensor (what training and predict use)."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(self(inputs)))

    # -- model outputs -> answers -----------------------------------------------------------------
    def answer(self, output: np.ndarray, *, top_k: int = 3, raw: bool = False) -> list[dict[str, Any]]:
        """One JSON-ready answer per row of the model's output (see :func:`answers`)."""
        return answers(output, self.task, labels=self.labels, target=self.target, top_k=top_k, raw=raw)


def short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _cell(value: Any, row: int, column: str) -> float:
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 100:
            raise DataError(f"input row {row}, column {column} is not a number: a {len(value)}-character cell",
                            fix="give numbers only (a CSV without stray text)")
        try:
            return float(text)
        except ValueError:
            raise DataError(f"input row {row}, column {column} is not a number: {short(value)}",
                            fix="give numbers only (a header row names the columns)") from None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DataError(f"input row {row}, column {column} is not a number: {short(value)}",
                        fix="give numbers only") from None


def numeric_matrix(inputs: Sequence[Any], features: Sequence[str] | None = None,
                   width: int | None = None) -> np.ndarray:
    """Rows of numbers (lists, arrays of any shape, dicts keyed by ``features``) as a float64 matrix;
    a row of the wrong width, a cell that is not a number, or a NaN/inf is a
    :class:`~overt.errors.DataError` naming the row and column."""
    fast = _fast_matrix(inputs)
    if fast is not None:
        return _checked(fast, features, width)
    rows: list[list[float]] = []
    for i, row in enumerate(inputs):
        if isinstance(row, dict):
            if not features:
                raise DataError(f"input row {i} has named columns ({', '.join(list(row)[:5])}), but this model "
                                "takes unnamed features", fix="give the rows as plain numbers (a CSV without a header)")
            missing = [c for c in features if c not in row]
            if missing:
                raise DataError(f"input row {i} lacks the column(s) {', '.join(missing)}",
                                where=f"row {i} has: {', '.join(str(k) for k in row)}",
                                fix=f"give every row the columns {', '.join(features)}")
            values = [_cell(row[c], i, c) for c in features]
        elif isinstance(row, str):
            raise DataError(f"input {i} is text ({short(row)}), this model takes rows of numbers",
                            fix="give numeric rows (a CSV file or a .npy array)")
        else:
            flat = np.asarray(row, dtype=object).reshape(-1) if not isinstance(row, np.ndarray) else row.reshape(-1)
            values = [_cell(v, i, str(j)) for j, v in enumerate(flat.tolist())]
        if width is not None and len(values) != width:
            named = f": {', '.join(features)}" if features else ""
            raise DataError(f"input row {i} has {len(values)} values; the model takes rows of {width} features{named}",
                            fix=f"give {width} numbers per row")
        rows.append(values)
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        raise DataError(f"input rows have different lengths: {sorted(widths)}", fix="give rows of equal length")
    return _checked(np.asarray(rows, dtype=np.float64).reshape(len(rows), -1), features, width)


def _fast_matrix(inputs: Sequence[Any]) -> np.ndarray | None:
    """A numeric array (or a list of equal-length numeric rows) converted at once; None -> read row by row."""
    if isinstance(inputs, np.ndarray) and inputs.dtype.kind in "fiub" and inputs.ndim >= 1:
        return inputs.reshape(len(inputs), -1).astype(np.float64)
    if not len(inputs) or any(isinstance(r, (dict, str)) for r in inputs):
        return None
    try:
        matrix = np.asarray(inputs, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return matrix.reshape(len(matrix), -1) if matrix.ndim >= 1 else None


def _checked(matrix: np.ndarray, features: Sequence[str] | None, width: int | None) -> np.ndarray:
    if width is not None and len(matrix) and matrix.shape[1] != width:
        named = f": {', '.join(features)}" if features else ""
        raise DataError(f"input rows have {matrix.shape[1]} values; the model takes rows of {width} features{named}",
                        fix=f"give {width} numbers per row")
    bad = ~np.isfinite(matrix)
    if bad.any():
        where = [(int(r), int(c)) for r, c in zip(*np.nonzero(bad))]
        named = [f"row {r}, column {features[c] if features else c} ({_word(matrix[r, c])})" for r, c in where[:5]]
        more = f" and {len(where) - 5} more" if len(where) > 5 else ""
        raise DataError(f"{len(where)} input value(s) are NaN or infinite: {'; '.join(named)}{more}",
                        why="the model never saw such values in training; its answer would be meaningless",
                        fix="fill or drop those cells before predicting")
    return matrix


def _word(value: float) -> str:
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def answers(output: np.ndarray, task: str, *, labels: Sequence[str] | None = None,
            target: dict[str, Any] | None = None, top_k: int = 3, raw: bool = False) -> list[dict[str, Any]]:
    """Model outputs -> answers a person can use.

    classification: ``{"class", "label", "probability", "top": [{"class", "label", "probability"}...]}``
    (``top_k`` classes by probability); regression: ``{target name: value in the target's units}``;
    ``raw`` (or task ``"raw"``): ``{"output": [...]}`` (logits for a classifier).  Non-finite numbers
    are written as ``null`` (strict JSON has no NaN)."""
    output = np.asarray(output, dtype=np.float64)
    if raw or task not in ("classification", "regression"):
        return [{"output": _json_numbers(row)} for row in output]
    if task == "regression":
        spec = target or {}
        values = output.reshape(len(output), -1) * float(spec.get("scale", 1.0)) + float(spec.get("shift", 0.0))
        name = str(spec.get("name", "value"))
        return [{name: _round(v[0]) if v.size == 1 else [_round(x) for x in v]} for v in values]
    probs = softmax(output.reshape(len(output), -1))
    out = []
    for p in probs:
        order = np.argsort(-p, kind="stable")[:max(int(top_k), 1)]
        top = [{"class": int(c), "label": _label(labels, int(c)), "probability": _round(p[c])} for c in order]
        out.append({**top[0], "top": top})
    return out


def _label(labels: Sequence[str] | None, index: int) -> Any:
    return labels[index] if labels and index < len(labels) else str(index)


def _round(value: float) -> float | None:
    return _finite(round(float(value), 6))


def _json_numbers(row: np.ndarray) -> Any:
    if row.ndim == 0:
        return _finite(float(row))
    return [_json_numbers(r) for r in row]
