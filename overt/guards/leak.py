"""Guard on a target handed to the model among its inputs (slug ``target-in-inputs``; issue 33,
data pipelines: splits and leakage, time-series windows that look ahead).

An invariant of supervised training: the model is not given the answer.  When one of the input's
features *is* the target -- a forecasting window that includes the value it forecasts
(``x = s[i:i+w+1]``, ``y = s[i+w]``), a label column left among the feature columns
(``X = df.values``), the target written into the sample by a collator -- the loss falls to nearly
nothing by copying, and every validation score measures the copy (fchollet/deep-learning-with-python-
notebooks#136 asks exactly this of a target column; the sliding-window reports of issue 33's
family: zzx-JLU/ECLGCNN#5, lingbai-kong/CausalFormer#8).

Seen on checked steps of a loss with one target per sample (``mse_loss``, ``l1_loss``,
``smooth_l1_loss``, ``huber_loss``, ``cross_entropy``, ``nll_loss``, the binary cross-entropies):
whether some feature of the model's input (flattened per sample: a window, a row of columns) equals
the target exactly for every sample of the batch, computed on the device and read with the checked
step's other values.  Reported when the same feature does so on two checked batches whose targets
vary (a constant target equals any constant feature), each of at least :data:`MIN_BATCH` samples.
Silent for targets with several values per sample (an autoencoder's, a sequence's), inputs wider
than :data:`MAX_FEATURES` values per sample, a batch whose input is not the model's first
argument, and integer inputs: token or category ids reach an embedding, and a target equal to one of
them is the task of copy and recall benchmarks ("the class is the first token"), not provably a leak
(round five's w143 twin, a correct program, was reported before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

MIN_BATCH = 16
MAX_FEATURES = 4096
LOSSES = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
                    "binary_cross_entropy", "binary_cross_entropy_with_logits"})


class TargetLeakChecks(Check):
    name = "leak"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.x: tuple[torch.Tensor, int, str] | None = None  # the latest checked forward's input, its step, model
        self.hits: dict[str, list[tuple[int, set[int]]]] = {}  # loss site -> (step, equal features) per batch
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if x is None or x.dim() < 2 or x.shape[0] < MIN_BATCH or x.device.type == "meta" or x.is_complex() \
                or not x.is_floating_point():  # ids (tokens, categories): a target among them is a copy task
            self.x = None
            return
        width = x.numel() // x.shape[0]  # per sample (x[0].numel() would be an op)
        self.x = (x.detach(), self.s.step, info.name) if 2 <= width <= MAX_FEATURES else None  # no graph kept

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        kept = self.x
        if name not in LOSSES or kept is None or kept[1] != self.s.step or not isinstance(target, torch.Tensor):
            return
        x, step, model = kept
        t = target.detach()
        if t.dim() == 2 and t.shape[1] == 1:
            t = t[:, 0]
        if t.dim() != 1 or t.shape[0] != x.shape[0] or t.device != x.device or t.dtype == torch.bool:
            return
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        flat = x.reshape(x.shape[0], -1)  # (x was detached when kept)
        same = (flat == t.to(flat.dtype)[:, None]).all(0)
        # the target's smallest and largest value (whether it varies), then which features equal it: one
        # tensor (cat promotes the booleans); integer targets in float64, exact however the deferred reads
        # of one device are concatenated
        extremes = torch.stack(torch.aminmax(t))
        if not extremes.is_floating_point():
            extremes = extremes.double()
        self.s.defer(torch.cat((extremes, same)), self._judge(name, loc, step, model, flat.shape[1]))

    def _judge(self, name: str, loc: str, step: int, model: str, width: int):
        def callback(vals: list[float]) -> None:
            if loc in self.done or vals[0] == vals[1]:  # a constant target equals any constant feature
                return
            equal = {i for i, v in enumerate(vals[2:]) if v}
            if not equal:
                return
            seen = self.hits.setdefault(loc, [])
            for prev_step, prev in seen:
                common = prev & equal
                if prev_step != step and common:
                    self.done.add(loc)
                    self._report(name, loc, model, width, min(common), (prev_step, step))
                    return
            seen.append((step, equal))

        return callback

    def _report(self, name: str, loc: str, model: str, width: int, feature: int, steps: tuple[int, int]) -> None:
        self.s.report(
            "target-in-inputs",
            f"the target given to F.{name} at {loc} equals input value {feature} of {model} (of {width} per "
            f"sample, flattened) exactly, for every sample of the batches of steps {steps[0]} and {steps[1]}: the "
            "model is handed the answer among its inputs and learns to copy it, so its training and validation "
            "scores measure the copy, not the task. A sliding window that includes the value it forecasts, a "
            "label column left among the feature columns, or a target written into the sample does this.",
            fix="build the inputs without the target: a forecasting window ends before the target's time step "
            "(x = s[i:i + w], y = s[i + w]); drop the label column from the features (X = df.drop(columns=[label])).",
            where=f"F.{name} call at {loc}", key=loc)
