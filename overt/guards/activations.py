"""Guard on dead ReLU units (slug ``dead-activations``).

On checked training forwards (after the first step) a one-shot forward hook on
every ``nn.ReLU`` of the model measures, on device, the fraction of units that
are zero for every sample of the batch.  Reported when a layer has at least
90% dead units on two checked steps in a row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from overt.guards.modes import ModelInfo
    from overt.guards.session import GuardSession

_MIN_BATCH = 8
_DEAD = 0.9


class ActivationChecks:
    def __init__(self, session: GuardSession):
        self.s = session
        self.strikes: dict[str, int] = {}
        self.armed_infos: list[ModelInfo] = []

    def arm(self, info: ModelInfo, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] < _MIN_BATCH or info.act_handles:
            return
        for relu in info.relus:
            info.act_handles.append(relu.register_forward_hook(self._make_hook(info, info.label(relu))))
        self.armed_infos.append(info)

    def _make_hook(self, info: ModelInfo, name: str):
        def hook(_m: Any, _args: tuple, out: Any) -> None:
            if isinstance(out, torch.Tensor) and out.dim() >= 2 and out.is_floating_point():
                try:
                    # a ReLU's output is >= 0: a unit is dead for the batch when its maximum is 0
                    peak = out.detach().reshape(out.shape[0], -1).amax(0)
                    self.s.defer(torch.count_nonzero(peak), self._callback(name, self.s.step, peak.numel()))
                except Exception:  # pragma: no cover - a guard never breaks forward
                    pass
        return hook

    def _callback(self, name: str, step: int, units: int):
        def callback(vals: list[float]) -> None:
            frac = 1.0 - vals[0] / max(units, 1)
            if frac >= _DEAD:
                self.strikes[name] = self.strikes.get(name, 0) + 1
                if self.strikes[name] >= 2:
                    self.s.report(
                        "dead-activations",
                        f"{frac:.0%} of the units after {name} output zero for every sample of the "
                        f"batch at step {step}: dead ReLUs get no gradient and never recover, so the "
                        f"network's capacity has silently shrunk. Fix: lower the learning rate, check "
                        f"the initialisation/bias, add normalisation, or use LeakyReLU/GELU.",
                        where=name, key=name, step=step,
                    )
            else:
                self.strikes[name] = 0
        return callback

    def disarm(self, info: ModelInfo) -> None:
        for h in info.act_handles:
            h.remove()
        info.act_handles = []

    def disarm_all(self) -> None:
        for info in self.armed_infos:
            self.disarm(info)
        self.armed_infos = []
