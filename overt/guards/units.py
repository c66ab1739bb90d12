"""The units a regression's predictions and targets are compared in (slug ``predictions-not-denormalised``).

A property every correct regression has: what its evaluation error compares -- the prediction and the
target -- is in one set of units.  A model that fitted its training targets (a checked training step's
loss explains most of their variance) predicts values whose location and spread are those of the
targets it is scored against, give or take what it did not learn.  Every way of losing track of a
normalisation breaks it, whatever the transform: a target standardised (StandardScaler, a manual
``(y - mean) / std``, a min-max scaling, ``log1p``) for training and predictions scored raw against
the targets in their own units; predictions put back with the inverse while the targets they are
scored against are still normalised; an inverse applied twice, or with another column's statistics.

This module holds the judgement, pure numbers: :class:`TrainingFit` keeps what the checked training
steps' regression losses showed (the targets' mean and spread, how well the model fitted them) and
:func:`judge` compares the two sides of an evaluation error.  Nothing is concluded where the premise
is not proven: an untrained or poorly fitting model (its predictions need not look like anything),
a side whose values are all the same, sides that overlap.  :mod:`overt.guards.predshape` finds the
evaluation errors (a subtraction from a model's output, an evaluation regression loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FAR = 5.0  # "far outside": a mean this many spreads away
SPREAD = 25.0  # "another scale": one side's spread this many times the other's (FAR squared)
FITTED = 0.5  # the share of the training targets' variance a checked step's loss must explain
RECORDS = 8  # training regression losses recorded per run


@dataclass(frozen=True)
class Side:
    """The mean and standard deviation of one side of a comparison."""

    mean: float
    std: float

    def usable(self) -> bool:
        return math.isfinite(self.mean) and math.isfinite(self.std) and self.std > 0


class TrainingFit:
    """The checked training steps' regression losses: their targets' units and how well they were fitted."""

    def __init__(self) -> None:
        self.records: list[tuple[float, float, float]] = []  # (target mean, target std, variance explained)
        self.columns: list[float] = []  # the latest record's variance explained per target column (2-D targets)

    def full(self) -> bool:
        return len(self.records) >= RECORDS

    def add(self, values: list[float]) -> None:
        """One deferred read of ``[target mean, target std, mean squared error]``, then, for targets of a few
        columns, the same three numbers per column."""
        mean, std, mse = values[:3]
        if math.isfinite(mean) and math.isfinite(std) and math.isfinite(mse) and std > 0:
            self.records.append((mean, std, 1.0 - mse / (std * std)))
            cols = values[3:]
            self.columns = [1.0 - e / (s * s) if s > 0 and math.isfinite(e) else -math.inf
                            for s, e in zip(cols[1::3], cols[2::3])]

    def __bool__(self) -> bool:
        return bool(self.records)

    def units(self) -> Side:
        """The training targets' typical mean and spread (medians over the checked steps)."""
        n = len(self.records) // 2
        return Side(sorted(m for m, _, _ in self.records)[n], sorted(s for _, s, _ in self.records)[n])

    def fitted(self) -> float | None:
        """The variance explained at the latest checked steps (the better of the last two), when the model
        fitted its targets (at least :data:`FITTED`), else None."""
        best = max(r for _, _, r in self.records[-2:])
        return best if best >= FITTED else None


def inside(side: Side, units: Side) -> bool:
    """Whether ``side`` looks like values in ``units`` (a model's predictions in its training units)."""
    return abs(side.mean - units.mean) <= 2 * units.std and side.std <= 3 * units.std


def outside(side: Side, units: Side) -> bool:
    """Whether ``side`` is far from ``units``: another location, another spread."""
    return abs(side.mean - units.mean) > FAR * units.std or side.std > FAR * units.std \
        or (side.std < units.std / FAR and abs(side.mean - units.mean) > units.std)


def apart(a: Side, b: Side) -> bool:
    """Whether two sides are in different units: their values do not overlap (means further apart than
    :data:`FAR` of the larger spread) or one spread is :data:`SPREAD` times the other."""
    wide, narrow = max(a.std, b.std), min(a.std, b.std)
    return abs(a.mean - b.mean) > FAR * wide or wide > SPREAD * narrow


def judge(pred: Side, other: Side, fit: TrainingFit) -> str | None:
    """Why ``pred`` and ``other`` (an evaluation error's two sides) are in different units, or None.

    "normalised": the predictions are in the training targets' (normalised) units and scored against
    values far outside them (no premise about the fit needed: the predictions are where training put
    them).  "apart": the model fitted its training targets, yet its predictions and what they are
    scored against do not overlap or differ in scale many times over."""
    if not (fit and pred.usable() and other.usable()):
        return None
    units = fit.units()
    if inside(pred, units) and outside(other, units):
        return "normalised"
    if fit.fitted() is not None and apart(pred, other):
        return "apart"
    return None


def judge_columns(pairs: list[tuple[Side, Side]], fit: TrainingFit) -> int | None:
    """The first column whose prediction and target are :func:`apart`, when the model fitted every column of
    its training targets (each explains at least :data:`FITTED` of its variance), else None: a per-column
    normalisation undone with another column's statistics leaves the whole table's mean and spread alone."""
    if len(fit.columns) != len(pairs) or not fit.columns or min(fit.columns) < FITTED:
        return None
    for c, (pred, other) in enumerate(pairs):
        if pred.usable() and other.usable() and apart(pred, other):
            return c
    return None


def explain_column(column: int, model: str, pred: Side, other: Side, fit: TrainingFit) -> str:
    """The finding's message for a :func:`judge_columns` verdict."""
    return (f"{model} fitted each of its {len(fit.columns)} training target columns (the checked steps' loss "
            f"explains at least {min(fit.columns):.0%} of each one's variance), yet in evaluation its column "
            f"{column} (mean {pred.mean:.3g}, std {pred.std:.3g}) is scored against values of mean {other.mean:.3g}, "
            f"std {other.std:.3g}: that column's prediction and target are in different units. A per-column "
            "normalisation undone with another column's statistics (or missing on one side for that column) "
            "makes the error measure the transform, not the model.")


def explain(kind: str, model: str, pred: Side, other: Side, fit: TrainingFit) -> str:
    """The finding's message for a :func:`judge` verdict."""
    units = fit.units()
    sides = (f"the predictions (mean {pred.mean:.3g}, std {pred.std:.3g}) are scored against values of mean "
             f"{other.mean:.3g}, std {other.std:.3g}")
    if kind == "normalised":
        return (f"the evaluation outputs of {model} are in the units of its training targets (mean "
                f"{units.mean:.3g}, std {units.std:.3g}, from the checked steps' losses), but here {sides}: "
                "predictions and targets are in different units, so the error measures the targets' "
                "normalisation, not the model.")
    fitted = fit.fitted() or 0.0
    where = ("the predictions are in the training targets' units and the values they are scored against "
             "are not" if inside(pred, units) and not inside(other, units) else
             "the values they are scored against are in the training targets' units and the predictions are "
             "not" if inside(other, units) and not inside(pred, units) else
             "neither side is where the other is")
    return (f"{model} fitted its training targets (mean {units.mean:.3g}, std {units.std:.3g}; the checked "
            f"steps' loss explains {fitted:.0%} of their variance), yet in evaluation {sides}: the two sides "
            f"of the error are in different units ({where}). A normalisation of the targets (a scaler, "
            "mean/std, min-max, log) is missing on one side, applied twice, or undone with other statistics, "
            "so the error measures the transform, not the model.")
