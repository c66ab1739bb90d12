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
from overt.text import first_names

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
    def from_dict(cls, data: dict[str, Any], source: str = "the preprocessing", field: str = "") -> Preprocessing:
        """The preprocessing a run (or an export) recorded, checked field by field first
        (:func:`validate_preprocessing`): a damaged file is a :class:`~overt.errors.SchemaError`
        naming ``source`` and the field, never a model fed inputs in the wrong units."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        validate_preprocessing(known, source, field)
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

    def numbers(self, inputs: Sequence[Any], offset: int = 0) -> np.ndarray:
        """Raw numeric inputs as a float64 matrix (one row per input), schema-checked: every row has
        the expected width, every cell is a number, none is NaN or infinite (named by row and column;
        ``offset`` numbers the first row)."""
        return numeric_matrix(inputs, self.features, self.n_features(), offset=offset)

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

    def prepare_text(self, inputs: Sequence[Any], offset: int = 0) -> np.ndarray:
        """Texts -> int64 ids, padded with the pad id to the longest (at least one id per text)."""
        spec = self.tokens or {}
        pad, unk = int(spec.get("pad", 0)), int(spec.get("unk", 1))
        rows = []
        for i, text in enumerate(inputs, offset):
            if not isinstance(text, str):
                raise at_row(DataError(f"input {i} is not text: {short(text)}",
                                       fix="give one sentence per input (a line of a text file, or --format text)"),
                             i)
            rows.append(self.ids(text) or [unk])
        longest = max((len(r) for r in rows), default=0)
        out = np.full((len(rows), longest), pad, dtype=np.int64)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out

    def __call__(self, inputs: Sequence[Any], offset: int = 0) -> np.ndarray:
        """Raw inputs -> the model's input batch (numpy); ``offset`` numbers the first input in errors."""
        if self.is_text:
            return self.prepare_text(inputs, offset)
        return self.prepare_numbers(self.numbers(inputs, offset))

    def tensor(self, inputs: Sequence[Any], offset: int = 0) -> Any:
        """Raw inputs -> the model's input batch as a torch tensor (what training and predict use)."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(self(inputs, offset)))

    # -- model outputs -> answers -----------------------------------------------------------------
    def answer(self, output: np.ndarray, *, top_k: int = 3, raw: bool = False) -> list[dict[str, Any]]:
        """One JSON-ready answer per row of the model's output (see :func:`answers`)."""
        return answers(output, self.task, labels=self.labels, target=self.target, top_k=top_k, raw=raw)


#: the most numbers one input may have, and the most entries of a vocabulary or a list of labels
MAX_FEATURES = 1 << 24


def safe_pattern(pattern: str) -> str | None:
    """None when the token ``pattern`` is plain enough that finding its tokens takes time linear in
    the text, else why not.  Accepted: alternatives, each a sequence of literal characters and
    character classes where only the last item may repeat (``[a-z0-9']+``, ``\\w+|[^\\w\\s]``,
    ``#\\w+``).  A repeat inside a repeat, a repeat followed by more pattern, a group, a
    back-reference or a look-around can take exponential (or quadratic) time on a crafted text."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # Python < 3.11
        import sre_parse as parser  # type: ignore[no-redef]
    try:
        tree = parser.parse(pattern)
    except Exception as exc:  # re.error, RecursionError, OverflowError
        return f"it is not a regular expression ({exc})"
    single = {"LITERAL", "NOT_LITERAL", "IN", "ANY", "CATEGORY", "AT"}

    def plain_sequence(items: Any) -> str | None:
        for index, (op, arg) in enumerate(items):
            name = str(op)
            if name in single:
                continue
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                inner = list(arg[2])
                if len(inner) != 1 or str(inner[0][0]) not in single:
                    return "a repeat applies to more than one character class (a group)"
                if index != len(items) - 1 and arg[1] != 0 and arg[1] != arg[0]:
                    return "a repeat is followed by more pattern"
                continue
            return f"it uses {name.lower().replace('_', ' ')}"
        return None

    if len(tree) == 1 and str(tree[0][0]) == "BRANCH":
        for branch in tree[0][1][1]:
            why = plain_sequence(list(branch))
            if why:
                return why
        return None
    return plain_sequence(list(tree))


def validate_preprocessing(data: dict[str, Any], source: str = "the preprocessing", field: str = "") -> None:
    """Check a recorded preprocessing's fields (types, bounds, a safe token pattern, lengths that
    agree); raises :class:`~overt.errors.SchemaError` naming ``source`` and the first bad fields
    (``field``: where the preprocessing sits in that file)."""
    from functools import partial

    from overt.errors import schema_error

    schema_error = partial(schema_error, field=field)

    try:
        spec = _schemas()["preprocessing"].model_validate(data)
    except Exception as exc:  # pydantic.ValidationError
        raise schema_error(source, exc) from None
    n = spec.n_features()
    for name in ("shift", "scale"):
        value = getattr(spec, name)
        if isinstance(value, list) and n is not None and len(value) != n:
            raise schema_error(source, ValueError(f"{name} has {len(value)} values for {n} features"))
        if name == "scale" and 0.0 in (value if isinstance(value, list) else [value]):
            raise schema_error(source, ValueError("scale holds a 0 (inputs would be divided by zero)"))
    if spec.shape is not None and math.prod(spec.shape) > MAX_FEATURES:
        raise schema_error(source, ValueError(f"shape {spec.shape} holds more than {MAX_FEATURES} values"))
    if spec.width is not None and spec.shape is not None and math.prod(spec.shape) != spec.width:
        raise schema_error(source, ValueError(f"shape {spec.shape} does not hold width {spec.width} values"))
    if spec.features is not None and spec.width is not None and len(spec.features) != spec.width:
        raise schema_error(source, ValueError(f"{len(spec.features)} features named for width {spec.width}"))
    pattern = spec.tokens.pattern if spec.tokens is not None else None
    if pattern is not None:
        why = safe_pattern(pattern)
        if why:
            raise schema_error(source, ValueError(f"tokens.pattern {short(pattern)} is not a plain token pattern: "
                                                  f"{why}"),
                               why="finding tokens with such a pattern can take hours on one crafted sentence "
                                   "(catastrophic backtracking)",
                               fix="restore the file as training wrote it; a recipe's own pattern should be "
                                   "character classes with one repeat at the end, e.g. [a-z0-9']+ or \\w+|[^\\w\\s]")


def _schemas() -> dict[str, Any]:
    """The pydantic models of the recorded preprocessing (built once, on first use)."""
    cached = _SCHEMAS.get("preprocessing")
    if cached is not None:
        return _SCHEMAS
    from typing import Annotated, Literal, Optional, Union

    from pydantic import BaseModel, ConfigDict, Field

    Count = Annotated[int, Field(strict=True, ge=1, le=MAX_FEATURES)]
    Id = Annotated[int, Field(strict=True, ge=0, le=MAX_FEATURES)]
    Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
    Name = Annotated[str, Field(max_length=10_000)]

    class Tokens(BaseModel):
        model_config = ConfigDict(extra="ignore", strict=True)
        vocab: Annotated[list[Name], Field(max_length=MAX_FEATURES)] = []
        split: Literal["words", "chars"] = "words"
        lower: bool = False
        pattern: Optional[Annotated[str, Field(max_length=1000)]] = None
        max_len: Optional[Annotated[int, Field(strict=True, ge=1, le=1 << 24)]] = None
        pad: Id = 0
        unk: Id = 1

    class Target(BaseModel):
        model_config = ConfigDict(extra="ignore")
        name: Name = "value"
        shift: Number = 0.0
        scale: Number = 1.0

    class Spec(BaseModel):
        model_config = ConfigDict(extra="ignore")
        width: Optional[Count] = None
        features: Optional[Annotated[list[Name], Field(max_length=MAX_FEATURES)]] = None
        shift: Union[Number, Annotated[list[Number], Field(max_length=MAX_FEATURES)]] = 0.0
        scale: Union[Number, Annotated[list[Number], Field(max_length=MAX_FEATURES)]] = 1.0
        shape: Optional[Annotated[list[Count], Field(min_length=1, max_length=8)]] = None
        tokens: Optional[Tokens] = None
        task: Literal["classification", "regression", "raw"] = "raw"
        labels: Optional[Annotated[list[Name], Field(max_length=MAX_FEATURES)]] = None
        target: Optional[Target] = None
        extra: dict[str, Any] = {}

        def n_features(self) -> int | None:
            if self.features:
                return len(self.features)
            if self.width:
                return self.width
            return math.prod(self.shape) if self.shape else None

    Spec.model_rebuild()
    _SCHEMAS["preprocessing"] = Spec
    return _SCHEMAS


_SCHEMAS: dict[str, Any] = {}


def short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def at_row(error: DataError, row: int) -> DataError:
    """``error`` marked with the number of the input it is about (``error.row``), so that a caller
    that knows where inputs came from can name the file and line."""
    error.row = row  # type: ignore[attr-defined]
    return error


def _cell(value: Any, row: int, column: str) -> float:
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 100:
            raise at_row(DataError(f"input row {row}, column {column} is not a number: a {len(value)}-character cell",
                                   fix="give numbers only (a CSV without stray text)"), row)
        try:
            return float(text)
        except ValueError:
            raise at_row(DataError(f"input row {row}, column {column} is not a number: {short(value)}",
                                   fix="give numbers only (a header row names the columns)"), row) from None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise at_row(DataError(f"input row {row}, column {column} is not a number: {short(value)}",
                               fix="give numbers only"), row) from None


def numeric_matrix(inputs: Sequence[Any], features: Sequence[str] | None = None,
                   width: int | None = None, offset: int = 0) -> np.ndarray:
    """Rows of numbers (lists, arrays of any shape, dicts keyed by ``features``) as a float64 matrix;
    a row of the wrong width, a cell that is not a number, or a NaN/inf is a
    :class:`~overt.errors.DataError` naming the row (numbered from ``offset``) and column."""
    fast = _fast_matrix(inputs)
    if fast is not None:
        return _checked(fast, features, width, offset)
    rows: list[list[float]] = []
    for i, row in enumerate(inputs, offset):
        if isinstance(row, dict):
            if not features:
                raise at_row(DataError(f"input row {i} has named columns ({', '.join(list(row)[:5])}), but this "
                                       "model takes unnamed features",
                                       fix="give the rows as plain numbers (a CSV without a header)"), i)
            missing = [c for c in features if c not in row]
            if missing:
                raise at_row(DataError(f"input row {i} lacks the column(s) {', '.join(missing)}",
                                       where=f"row {i} has: {', '.join(str(k) for k in row)}",
                                       fix=f"give every row the columns {', '.join(features)}"), i)
            values = [_cell(row[c], i, c) for c in features]
        elif isinstance(row, str):
            raise at_row(DataError(f"input {i} is text ({short(row)}), this model takes rows of numbers",
                                   fix="give numeric rows: a .csv file, a .npy array, or --format csv for a file "
                                       "or stdin of comma-separated numbers"), i)
        else:
            flat = np.asarray(row, dtype=object).reshape(-1) if not isinstance(row, np.ndarray) else row.reshape(-1)
            values = [_cell(v, i, str(j)) for j, v in enumerate(flat.tolist())]
        if width is not None and len(values) != width:
            named = f": {first_names(list(features))}" if features else ""
            raise at_row(DataError(f"input row {i} has {len(values)} values; the model takes rows of {width} "
                                   f"features{named}", fix=f"give {width} numbers per row"), i)
        rows.append(values)
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        raise DataError(f"input rows have different lengths: {sorted(widths)}", fix="give rows of equal length")
    return _checked(np.asarray(rows, dtype=np.float64).reshape(len(rows), -1), features, width, offset)


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


def _checked(matrix: np.ndarray, features: Sequence[str] | None, width: int | None, offset: int = 0) -> np.ndarray:
    if width is not None and len(matrix) and matrix.shape[1] != width:
        named = f": {first_names(list(features))}" if features else ""
        raise at_row(DataError(f"input rows have {matrix.shape[1]} values; the model takes rows of {width} "
                               f"features{named}", fix=f"give {width} numbers per row"), offset)
    bad = ~np.isfinite(matrix)
    if bad.any():
        where = [(int(r), int(c)) for r, c in zip(*np.nonzero(bad))]
        named = [f"row {r + offset}, column {features[c] if features else c} ({_word(matrix[r, c])})"
                 for r, c in where[:5]]
        more = f" and {len(where) - 5} more" if len(where) > 5 else ""
        raise at_row(DataError(f"{len(where)} input value(s) are NaN or infinite: {'; '.join(named)}{more}",
                               why="the model never saw such values in training; its answer would be meaningless",
                               fix="fill or drop those cells before predicting"), where[0][0] + offset)
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
