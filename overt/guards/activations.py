"""Guard on dead ReLU units (slug ``dead-activations``).

On checked training forwards (after the first step) a one-shot forward hook on
every ``nn.ReLU`` of the model measures, on device, the fraction of units that
are zero for every sample of the batch.  Reported when a layer has at least
90% dead units on two checked steps in a row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards import aside
from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

_MIN_BATCH = 8
_DEAD = 0.9


class ActivationChecks(Check):
    name = "acts"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.strikes: dict[str, int] = {}
        self.handles: dict[int, list[Any]] = {}  # id(ModelInfo) -> the one-shot hooks on its ReLUs

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if not light and info.relus and self.s.step >= 1:
            self.arm(info, args)

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if id(info) in self.handles:
            self.disarm(info)

    def remove_hooks(self) -> None:
        for handles in self.handles.values():
            for h in handles:
                h.remove()
        self.handles.clear()

    def arm(self, info: ModelInfo, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] < _MIN_BATCH or id(info) in self.handles:
            return
        early = aside.WINDOW is not None or aside.EARLY  # the axes window's mode stands aside in the hooks
        handles = []
        for relu in info.relus:
            hook = self._make_hook(info.label(relu))
            handles.append(relu.register_forward_hook(aside.hook(hook) if early else hook))
        self.handles[id(info)] = handles

    def _make_hook(self, name: str):
        def hook(_m: Any, _args: tuple, out: Any) -> None:
            if isinstance(out, torch.Tensor) and out.dim() >= 2 and out.is_floating_point():
                try:
                    # a ReLU's output is >= 0: a unit is dead for the batch when its maximum is 0
                    peak = out.detach().reshape(out.shape[0], -1).amax(0)
                    self.s.defer(torch.count_nonzero(peak), self._callback(name, self.s.step, peak.numel()))
                except Exception as exc:  # a guard never breaks forward
                    self.s.check_failed(self, exc)
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
                        f"batch at step {self.s.run_step(step)}: dead ReLUs get no gradient and never recover, so the "
                        "network's capacity has silently shrunk.",
                        fix="lower the learning rate, check "
                        "the initialisation/bias, add normalisation, or use LeakyReLU/GELU.",
                        where=name, key=name, step=step,
                    )
            else:
                self.strikes[name] = 0
        return callback

    def disarm(self, info: ModelInfo) -> None:
        for h in self.handles.pop(id(info), ()):
            h.remove()
