"""Evaluation inputs prepared unlike the training inputs (slug ``train-serve-skew``, at
evaluation time during training; issue 33 family 4).

An invariant of a training run: the model is evaluated on inputs prepared like the ones it is
trained on.  Inputs standardised for training but not for evaluation (or scaled, reordered,
another modality's preprocessing) break it.  On checked training forwards the per-feature sums
of the model's first input (a ``(batch, features)`` float tensor) are accumulated on the device;
the first evaluation forwards (eval mode) of each model compare their per-feature means with
those statistics: the comparison is a device tensor read with the next checked step's values,
so nothing is synchronised.  Reported: more than half of the features (those not constant in
training) shifted by more than :data:`Z` training standard deviations or spread :data:`SCALE`
times more or less than in training.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

Z = 3.0  # standard deviations of a feature's training values
SCALE = 2.0  # the spread of a feature's evaluation values, relative to training
MIN_TRAIN = 3  # checked training forwards before evaluation inputs are compared
MIN_EVAL = 16  # samples in the evaluation batch
LOOKS = 3  # evaluation batches compared per model
MAX_FEATURES = 4096


def _features(args: tuple) -> torch.Tensor | None:
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if x is None or not x.is_floating_point() or x.dim() != 2 or not 1 < x.shape[1] <= MAX_FEATURES:
        return None
    return x.detach()


class SkewChecks(Check):
    name = "skew"

    def __init__(self, session: Any):
        super().__init__(session)
        self.stats: dict[int, list[Any]] = {}  # id(ModelInfo) -> [forwards, n, sum, sum of squares]
        self.looks: dict[int, int] = {}
        self.hook = OneShotHook()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        x = _features(args)
        if x is None:
            return
        st = self.stats.get(id(info))
        x = x.float()
        if st is None or st[2].shape != x.shape[1:] or st[2].device != x.device:
            st = self.stats[id(info)] = [0, 0, torch.zeros_like(x[0]), torch.zeros_like(x[0])]
        st[0] += 1
        st[1] += x.shape[0]
        st[2] += x.sum(0)
        st[3] += (x * x).sum(0)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._arm(info)

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._arm(info)

    def _arm(self, info: ModelInfo) -> None:
        self.hook.clear_stale()
        st = self.stats.get(id(info))
        if self.hook.pending or info.module.training or st is None or st[0] < MIN_TRAIN:
            return
        if self.looks.get(id(info), 0) >= LOOKS or self.s.reporter.has("train-serve-skew", info.name):
            return
        self.hook.place(info.module, self._after(info))

    def _after(self, info: ModelInfo):
        def hook(module: Any, args: tuple, output: Any) -> None:
            if not self.hook.fired():
                return
            try:
                self._compare(info, args)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _compare(self, info: ModelInfo, args: tuple) -> None:
        x = _features(args)
        st = self.stats.get(id(info))
        if x is None or st is None or x.shape[0] < MIN_EVAL or st[2].shape != x.shape[1:] or st[2].device != x.device:
            return
        self.looks[id(info)] = self.looks.get(id(info), 0) + 1
        n = st[1]
        mean = st[2] / n
        std = (st[3] / n - mean * mean).clamp_min(0).sqrt()
        judged = std > 0.1 * std.mean() + 1e-12  # features (nearly) constant in training are not judged
        u = (x.float() - mean) / std.clamp_min(1e-12)  # evaluation values in training standard deviations
        z = u.mean(0).abs()  # the shift of the mean
        m2 = (u * u).mean(0)  # ~1 when prepared alike; << 1 or >> 1 when scaled differently
        off = ((z > Z) | (m2 > SCALE * SCALE) | (m2 < 1 / (SCALE * SCALE))) & judged
        shifted = off.float().sum() / judged.float().sum().clamp_min(1)
        med = torch.where(judged, m2, torch.full_like(m2, float("nan"))).nanmedian().sqrt()
        features, step = x.shape[1], self.s.step
        self.s.defer(torch.stack((shifted, med)), self._judge(info, features, step))

    def _judge(self, info: ModelInfo, features: int, step: int):
        s = self.s

        def callback(vals: list[float]) -> None:
            shifted, med = vals
            if not shifted > 0.5:
                return
            s.report(
                "train-serve-skew",
                f"the evaluation inputs of {info.name} are not prepared like its training inputs: in "
                f"{shifted:.0%} of the {features} input features the evaluation batch's mean lies more than "
                f"{Z:g} training standard deviations from the training mean or its spread is off by more than "
                f"{SCALE:g}x (median root-mean-square of the evaluation values in training standard deviations: "
                f"{med:.2g}, 1 when prepared alike). "
                "Preprocessing (standardisation, scaling, feature order) applied to one and not the other makes "
                "every validation metric measure the wrong inputs.",
                fix="apply the same preprocessing to training and evaluation inputs (fit the normaliser on the "
                "training data, then transform both).",
                where=f"{info.name} forward, evaluation", key=f"eval:{info.name}", step=step,
            )

        return callback

    def remove_hooks(self) -> None:
        self.hook.remove()
