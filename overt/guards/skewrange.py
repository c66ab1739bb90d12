"""Evaluation values outside the range a feature's training values take (slug ``train-serve-skew``, a third
comparison of :mod:`overt.guards.skew`).

The premise: evaluation inputs prepared like the training inputs are drawn from where the training inputs lie.
Whatever subset of that distribution an evaluation batch holds (one class, the hardest items, a sorted slice),
its values of a feature lie within the range the training values of that feature cover: of the training rows kept
by :mod:`overt.guards.skew` (the first rows of the run) and the latest rows (:class:`RecentRows`), the central 99% of each feature's values (its 0.5th to 99.5th percentile) leave about
1% of evaluation values outside when both come from one distribution, and a batch of one class stays inside
because the training range holds that class.  Reported when, in the median feature judged (not constant in
training), at least :data:`~overt.guards.skew.OUTSIDE` of the evaluation values (ten times the rate of one
distribution) lie outside it: a preparation that moves part of the evaluation data off the training support (a
normalisation whose scale comes from another quantity, a resampling or unit applied to some inputs) breaks it where
the mean and spread of the batch move less than the shift comparison's thresholds.  Silent where training itself
moves: when the latest training rows leave the first rows' range in more than :data:`DRIFT` of their values (in
the median feature), the run changed its data (a pretraining on clean digits, then fine-tuning on noisy scans, as
w189's twin; a curriculum) and the rows the checked steps kept cannot prove where all of training lay.  Only tables (a
``(batch, features)`` first input) with at least :data:`MIN_FEATURES` judged features are compared: the median of a
few features, or of images' per-channel mean and spread, is one statistic's noise (MNIST's test images against its
training images: 11% outside in the median of the two).  Computed on the device with
the shift comparison's values, read at the next checked step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

TAIL = 0.005  # each side of a feature's training values left out of its range
DRIFT = 0.05  # the latest training rows outside the first rows' range, in the median feature, beyond which silent
MIN_FEATURES = 16  # judged features needed: the median of a few is one feature's noise (a table's columns only)


class RecentRows:
    """The latest ``keep`` training rows of a table (device copies of checked forwards' inputs, oldest dropped):
    with the first rows :mod:`overt.guards.skew` keeps, the range holds every phase of training."""

    def __init__(self, keep: int):
        self.keep = keep
        self.rows: list[torch.Tensor] = []
        self.count = 0

    def add(self, x: torch.Tensor) -> None:
        row = x[-self.keep:].clone()
        if self.rows and (self.rows[0].shape[1:] != row.shape[1:] or self.rows[0].device != row.device):
            self.rows, self.count = [], 0  # another input: start again
        self.rows.append(row)
        self.count += row.shape[0]
        while self.count - self.rows[0].shape[0] >= self.keep:
            self.count -= self.rows.pop(0).shape[0]

    def shape_fits(self, train: torch.Tensor) -> bool:
        return bool(self.rows) and self.rows[0].shape[1:] == train.shape[1:] and self.rows[0].device == train.device


def outside_share(train: torch.Tensor, x: torch.Tensor, judged: torch.Tensor) -> torch.Tensor:
    """The share of evaluation values ``x`` outside the central 99% of each feature's training values, in the
    median judged feature (a device tensor; 0 when no feature is judged)."""
    lo = torch.quantile(train, TAIL, dim=0)
    hi = torch.quantile(train, 1 - TAIL, dim=0)
    out = ((x < lo) | (x > hi)).float().mean(0)
    med = torch.where(judged, out, torch.full_like(out, float("nan"))).nanmedian()
    # too few judged features: 0, decided on the device (nothing here waits for it)
    return torch.where(judged.sum() >= MIN_FEATURES, torch.nan_to_num(med, nan=0.0), 0.0)


def range_share(first: torch.Tensor, latest: torch.Tensor, x: torch.Tensor, judged: torch.Tensor) -> torch.Tensor:
    """:func:`outside_share` of ``x`` against the first and the latest training rows together, where the latest
    rows themselves stay within the first rows' range (at most :data:`DRIFT` outside in the median feature);
    else 0: training moved from one range to another (pretraining on clean data, fine-tuning on noisy scans, a
    curriculum), and the checked steps' rows cannot prove where all of it lay."""
    drift = outside_share(first, latest, judged)
    return torch.where(drift <= DRIFT, outside_share(torch.cat((first, latest)), x, judged), 0.0)


def report_outside(s: Any, info: ModelInfo, outside: float, features: str, samples: int, step: int,
                   where: str) -> None:
    s.report(
        "train-serve-skew",
        f"the evaluation inputs of {info.name} leave the range of its training inputs: in the median of the "
        f"{features}, {outside:.0%} of {samples} evaluation samples lie outside the central 99% of the training "
        "values (about 1% when both come from one distribution; a batch of one class or the hardest items stays "
        "inside, since training holds them too). Inputs prepared another way for evaluation (a normalisation "
        "whose scale or centre is taken from another quantity, a unit, resampling or encoding applied to one path "
        "and not the other) put the evaluation data where the model was never trained, so every validation metric "
        "measures inputs the model does not serve.",
        fix="prepare evaluation inputs with exactly the code and statistics of the training inputs, and check the "
        "preparation step that differs between the two paths (the normalisation's centre and scale first).",
        where=where, key=f"eval:{info.name}", step=step,
    )
