"""What the model was trained on, recorded once, and new inputs checked against it.

At the start of training ``overt train`` records, from a bounded random sample of the
training split (at most :data:`SAMPLE` samples: no extra pass over a large data set), the
model's input schema (per-sample shape, dtype, feature names when the recipe declares them)
and, for numeric inputs, per-feature statistics (min, max, mean, std, fraction of non-finite
values) and the spread of each row's scale and of an outlier score; for classification, the
classes and the label distribution.  It is ``inputs.json`` in the run directory.

``overt predict`` compares the model's inputs (after the declared preprocessing) with it:
:func:`check_inputs` returns ``train-serve-skew`` findings for rows whose scale is far from
every training row's (e.g. 0..16 pixels given where 0..1 were expected), rows far outside the
training distribution (columns in another order, other units), and constant rows.

Everything here is numpy; the sample is drawn with torch only when a Dataset is given.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

#: training samples read for the record, at most
SAMPLE = 2048
#: a row whose scale (RMS) is this many times beyond the training rows' 0.5%..99.5% range is skewed
SCALE_FACTOR = 3.0
#: a row whose outlier score exceeds this many times the training sample's largest is skewed
SCORE_FACTOR = 3.0


def _first(item: Any) -> tuple[Any, Any]:
    if isinstance(item, (tuple, list)) and len(item) >= 2:
        return item[0], item[1]
    if isinstance(item, dict):
        values = list(item.values())
        return (values[0], values[1] if len(values) > 1 else None) if values else (None, None)
    return item, None


def _array(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except Exception:  # noqa: BLE001 -- anything that is not an array is recorded as "other"
        return None


def sample_pairs(data: Any, limit: int = SAMPLE, seed: int = 0) -> tuple[list[np.ndarray], list[Any], int | None]:
    """Up to ``limit`` (input, target) pairs of a training split, drawn at random with a fixed seed from a
    sized dataset, or the first batches of a loader; and the split's size when known."""
    inputs: list[np.ndarray] = []
    targets: list[Any] = []
    try:
        from torch.utils.data import DataLoader
    except ImportError:  # pragma: no cover
        DataLoader = ()  # type: ignore[assignment]
    if isinstance(data, DataLoader):
        for batch in data:
            x, y = _first(batch)
            xa, ya = _array(x), _array(y)
            if xa is None:
                break
            for i in range(len(xa)):
                inputs.append(xa[i])
                targets.append(None if ya is None or ya.ndim == 0 else ya[i])
            if len(inputs) >= limit:
                break
        size = len(data.dataset) if hasattr(data.dataset, "__len__") else None  # type: ignore[arg-type]
        return inputs[:limit], targets[:limit], size
    size = len(data)
    picks = np.random.default_rng(seed).choice(size, size=min(size, limit), replace=False) if size > limit \
        else np.arange(size)
    for index in sorted(int(i) for i in picks):
        x, y = _first(data[index])
        xa = _array(x)
        if xa is None:
            continue
        inputs.append(xa)
        targets.append(_array(y))
    return inputs, targets, size


def _row_scale(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.mean(np.square(x), axis=1))


def _soft_std(std: np.ndarray) -> np.ndarray:
    """Per-feature spread for the outlier score: a feature constant in training (always-blank pixels)
    still allows values of a tenth of a typical feature's spread."""
    floor = 0.1 * float(np.mean(std)) if std.size and np.mean(std) > 0 else 1.0
    return np.sqrt(np.square(std) + floor ** 2)


def _scores(x: np.ndarray, mean: np.ndarray, soft: np.ndarray) -> np.ndarray:
    return np.mean(np.square((x - mean) / soft), axis=1)


def build_record(data: Any, *, preprocessing: dict[str, Any] | None = None, labels: Sequence[str] | None = None,
                 limit: int = SAMPLE) -> dict[str, Any]:
    """The record of a training split (see the module docstring), JSON-ready."""
    try:
        inputs, targets, size = sample_pairs(data, limit)
    except Exception as exc:  # noqa: BLE001 -- an unusual data set costs the record, never the run
        return {"sample": {"size": 0, "error": f"{type(exc).__name__}: {exc}"},
                **({"preprocessing": preprocessing} if preprocessing else {})}
    record: dict[str, Any] = {"sample": {"size": len(inputs), "of": size, "limit": limit,
                                         "how": "a seeded random sample of the training split"}}
    if preprocessing:
        record["preprocessing"] = preprocessing
    if not inputs:
        return record
    shapes = {tuple(x.shape) for x in inputs}
    dtype = str(inputs[0].dtype)
    schema: dict[str, Any] = {"dtype": dtype, "shape": list(inputs[0].shape) if len(shapes) == 1 else None}
    features = (preprocessing or {}).get("features")
    if features:
        schema["features"] = list(features)
    record["schema"] = schema
    if len(shapes) == 1 and np.issubdtype(inputs[0].dtype, np.floating):
        x = np.stack([np.asarray(i, dtype=np.float64).reshape(-1) for i in inputs])
        finite = np.isfinite(x)
        xf = np.where(finite, x, np.nan)
        with np.errstate(all="ignore"):
            mean, std = np.nanmean(xf, axis=0), np.nanstd(xf, axis=0)
            lo, hi = np.nanmin(xf, axis=0), np.nanmax(xf, axis=0)
        mean, std = np.nan_to_num(mean), np.nan_to_num(std)
        clean = np.where(finite, x, mean)
        soft = _soft_std(std)
        scales, scores = _row_scale(clean), _scores(clean, mean, soft)
        record["stats"] = {
            "min": _list(lo), "max": _list(hi), "mean": _list(mean), "std": _list(std),
            "non_finite": _list(1.0 - finite.mean(axis=0)),
            "row_scale": _spread(scales),
            "row_spread": _spread(np.std(clean, axis=1)),
            "score_max": float(scores.max()),
            "constant_rows": float(np.mean(np.ptp(clean, axis=1) == 0)) if clean.shape[1] > 1 else 0.0,
        }
    classes = _classes(targets, labels)
    if classes is not None:
        record["classes"] = classes
    return record


def _spread(values: np.ndarray) -> dict[str, float]:
    return {"p0.5": float(np.quantile(values, 0.005)), "p50": float(np.median(values)),
            "p99.5": float(np.quantile(values, 0.995))}


def _beyond(values: np.ndarray, spread: dict[str, float] | None) -> np.ndarray:
    """Rows whose value is :data:`SCALE_FACTOR` times outside the training rows' 0.5%..99.5% range."""
    if not spread or spread["p50"] <= 0:
        return np.zeros(len(values), bool)
    return (values < spread["p0.5"] / SCALE_FACTOR) | (values > spread["p99.5"] * SCALE_FACTOR)


def _classes(targets: list[Any], labels: Sequence[str] | None) -> dict[str, Any] | None:
    """Class count, names and distribution when every sampled target is one integer class."""
    values = [t for t in targets if t is not None]
    if not values or any(np.asarray(t).size != 1 or not np.issubdtype(np.asarray(t).dtype, np.integer)
                         for t in values):
        return None
    ints = np.asarray([int(np.asarray(t).reshape(-1)[0]) for t in values])
    if ints.min() < 0:
        return None
    n = max(int(ints.max()) + 1, len(labels or []))
    counts = np.bincount(ints, minlength=n)
    names = list(labels) if labels else [str(i) for i in range(n)]
    return {"count": n, "names": names, "distribution": [round(float(c) / len(ints), 6) for c in counts]}


def _list(values: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(float(v)) else None for v in values]


# -- checking new inputs ------------------------------------------------------------------------------------
def _rows(indices: Sequence[int], limit: int = 8, count: int | None = None) -> str:
    shown = ", ".join(str(i) for i in indices[:limit])
    total = len(indices) if count is None else count
    return shown + (f" and {total - limit} more" if total > limit else "")


def check_inputs(x: np.ndarray, record: dict[str, Any], *, offset: int = 0) -> list[dict[str, Any]]:
    """Problems of one prepared batch ``x`` (N, ...) against the training record: a list of
    ``{"kind", "rows", "message", ...}`` (empty when the inputs look like the training data).
    ``offset`` numbers the rows of this batch within the whole input."""
    stats = record.get("stats")
    if not stats or x.size == 0 or not np.issubdtype(x.dtype, np.floating):
        return []
    flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    mean = np.asarray([v if v is not None else 0.0 for v in stats["mean"]])
    std = np.asarray([v if v is not None else 0.0 for v in stats["std"]])
    if flat.shape[1] != mean.size:
        return []
    problems: list[dict[str, Any]] = []
    scales = _row_scale(flat)
    spread = stats["row_scale"]
    constant = np.ptp(flat, axis=1) == 0 if flat.shape[1] > 1 else np.zeros(len(flat), bool)
    if stats.get("constant_rows", 0.0) < 0.01 and constant.any():
        rows = [int(i) + offset for i in np.nonzero(constant)[0]]
        value = float(flat[np.nonzero(constant)[0][0], 0])
        problems.append({"kind": "constant", "rows": rows, "value": value})
    spreads = np.std(flat, axis=1)
    by_spread = _beyond(spreads, stats.get("row_spread"))
    scaled = ~constant & (by_spread | _beyond(scales, spread))
    if scaled.any():
        rows = [int(i) + offset for i in np.nonzero(scaled)[0]]
        if by_spread[scaled].all():  # the spread of a standardised row shows a scale error best
            factor = float(np.median(spreads[scaled])) / stats["row_spread"]["p50"]
        else:
            factor = float(np.median(scales[scaled])) / spread["p50"] if spread["p50"] > 0 else math.inf
        problems.append({"kind": "scale", "rows": rows, "factor": round(factor, 4)})
    score = _scores(flat, mean, _soft_std(std))
    outside = ~constant & ~scaled & (score > SCORE_FACTOR * max(stats["score_max"], 1e-12))
    if outside.any():
        rows = [int(i) + offset for i in np.nonzero(outside)[0]]
        lo_f = np.asarray([v if v is not None else -np.inf for v in stats["min"]])
        hi_f = np.asarray([v if v is not None else np.inf for v in stats["max"]])
        margin = 0.1 * np.maximum(hi_f - lo_f, 1e-12)
        beyond = ((flat[outside] < lo_f - margin) | (flat[outside] > hi_f + margin)).mean(axis=1)
        problems.append({"kind": "outside", "rows": rows, "beyond_range": round(float(np.median(beyond)), 4),
                         "score": round(float(np.median(score[outside])), 4),
                         "training_score_max": round(float(stats["score_max"]), 4)})
    return problems


def describe(problem: dict[str, Any]) -> str:
    """One sentence for a problem found by :func:`check_inputs`."""
    rows = problem["rows"]
    kind = problem["kind"]
    count = problem.get("count", len(rows))  # every row found (``rows`` may list only the first)
    if kind == "constant":
        return (f"{count} input(s) are constant (every value {problem['value']:g} after preprocessing), "
                f"which no training input was: rows {_rows(rows, count=count)}")
    if kind == "scale":
        return (f"{count} input(s) are on another scale than the training data: their typical magnitude is "
                f"{_times(problem['factor'])} the training inputs' (rows {_rows(rows, count=count)})")
    return (f"{count} input(s) lie far outside the training distribution (a median {problem['beyond_range']:.0%} "
            f"of their values beyond the training range; outlier score {problem['score']:.3g}, at most "
            f"{problem['training_score_max']:.3g} in training): rows {_rows(rows, count=count)}")


def _times(factor: float) -> str:
    if not math.isfinite(factor):
        return "far from"
    return f"about {factor:.3g}x" if factor >= 1 else f"about 1/{1 / max(factor, 1e-12):.3g} of"


# -- reading the record back ----------------------------------------------------------------------------------
def validate_record(data: Any, source: str = "inputs.json") -> dict[str, Any]:
    """The record read back from ``source`` (a run's ``inputs.json``, an export's ``inputs``), checked
    against its schema first: every field the skew check and predict read has the type and the
    length :func:`build_record` gives it.  Anything else is a :class:`~overt.errors.SchemaError`
    naming the file and the field (a damaged record must never turn a check off silently).  The
    ``preprocessing`` field is checked by :func:`overt.preprocessing.validate_preprocessing`."""
    from overt.errors import schema_error

    if not isinstance(data, dict):
        raise schema_error(source, ValueError(f"it holds a JSON {type(data).__name__}, not an object"))
    try:
        record = _record_schema().model_validate(data)
    except Exception as exc:  # pydantic.ValidationError
        raise schema_error(source, exc) from None
    stats, schema = record.stats, record.schema_
    if stats is not None:
        lengths = {name: len(getattr(stats, name)) for name in ("min", "max", "mean", "std")}
        if len(set(lengths.values())) > 1:
            raise schema_error(source, ValueError(f"stats lists differ in length: {lengths}"))
        width = math.prod(schema.shape) if schema is not None and schema.shape else None
        if width is not None and lengths["mean"] != width:
            raise schema_error(source, ValueError(f"stats describe {lengths['mean']} features, schema.shape "
                                                  f"{schema.shape} holds {width}"))
    classes = record.classes
    if classes is not None and classes.names is not None and len(classes.names) != classes.count:
        raise schema_error(source, ValueError(f"classes.names lists {len(classes.names)} names for "
                                              f"{classes.count} classes"))
    return data


def _record_schema() -> Any:
    """The pydantic model of ``inputs.json`` (built once, on first use: pydantic loads only here)."""
    if "record" in _SCHEMAS:
        return _SCHEMAS["record"]
    from typing import Annotated, Optional

    from pydantic import BaseModel, ConfigDict, Field

    big = 1 << 24
    Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
    Numbers = Annotated[list[Optional[Number]], Field(max_length=big)]
    Count = Annotated[int, Field(strict=True, ge=0, le=1 << 62)]

    class Spread(BaseModel):
        model_config = ConfigDict(extra="ignore", populate_by_name=True)
        low: Number = Field(alias="p0.5")
        p50: Number
        high: Number = Field(alias="p99.5")

    class Stats(BaseModel):
        model_config = ConfigDict(extra="ignore")
        min: Numbers
        max: Numbers
        mean: Numbers
        std: Numbers
        row_scale: Spread
        row_spread: Optional[Spread] = None
        score_max: Number
        constant_rows: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0

    class Schema(BaseModel):
        model_config = ConfigDict(extra="ignore")
        dtype: Annotated[str, Field(max_length=64)]
        shape: Optional[Annotated[list[Annotated[int, Field(strict=True, ge=0, le=big)]], Field(max_length=8)]]
        features: Optional[Annotated[list[Annotated[str, Field(max_length=10_000)]], Field(max_length=big)]] = None

    class Classes(BaseModel):
        model_config = ConfigDict(extra="ignore")
        count: Annotated[int, Field(strict=True, ge=1, le=big)]
        names: Optional[Annotated[list[Annotated[str, Field(max_length=10_000)]], Field(max_length=big)]] = None
        distribution: Optional[Numbers] = None

    class Sample(BaseModel):
        model_config = ConfigDict(extra="ignore")
        size: Count

    class Record(BaseModel):
        model_config = ConfigDict(extra="ignore", populate_by_name=True)
        sample: Optional[Sample] = None
        preprocessing: Optional[dict[str, Any]] = None
        schema_: Optional[Schema] = Field(default=None, alias="schema")
        stats: Optional[Stats] = None
        classes: Optional[Classes] = None

    _SCHEMAS["record"] = Record
    return Record


_SCHEMAS: dict[str, Any] = {}
