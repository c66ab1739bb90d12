"""Guard on a fixed model run in training mode while another model trains (slug
``frozen-model-in-train-mode``; issue 33).

An invariant of distillation and of frozen feature extractors: a model whose weights stay fixed
while another model trains (a pretrained teacher, a frozen encoder feeding a new head) is a fixed
function, so it runs in eval mode.  Left in training mode its Dropout keeps dropping units (the
soft targets or features are noise) and its BatchNorm normalises with each batch's statistics and
overwrites the running statistics it was trained with: the "frozen" model changes under the run.

Seen on checked steps, for a watched root model in training mode with active Dropout (p > 0) or
BatchNorm modules, run forward (under ``no_grad`` or with every parameter's ``requires_grad`` off)
on a step that an optimizer then takes.  Its weights
are sampled (32 strided values and the float64 sum of every floating parameter, a device copy) at
the first such forward and compared at a later one at least ``SPAN`` optimizer steps on: reported,
once per model, when they are identical (a model some optimizer trains, such as a GAN's generator
run under ``no_grad`` for the discriminator's step, and a momentum/EMA target network, which the
run moves on purpose and BYOL-style methods run in training mode, change them and stay silent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from overt.guards.check import Check
from overt.guards.samples import weight_sample
from overt.guards.where import user_location
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

SPAN = 8  # optimizer steps between the two samples of the weights


class FrozenModeChecks(Check):
    name = "frozenmode"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.seen: dict[int, tuple[int, str]] = {}  # id(info) -> (step, forward's location) of this step's forward
        self.first: dict[int, tuple[int, torch.Tensor]] = {}  # id(info) -> (optimizer steps, weight sample)
        self.done: set[int] = set()

    def _candidate(self, info: ModelInfo, forward: bool = False) -> list[torch.Tensor] | None:
        """The floating parameters of ``info``'s model if it is in training mode with active Dropout/BatchNorm
        (``forward``: in a forward that makes no gradient for any of them), else None."""
        module = info.module
        if id(info) in self.done or not module.training or not self.s.optimizers:
            return None
        active = [m for m in info.dropbn if m.training]
        if not active:
            return None
        if forward and torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters()):
            return None  # a forward that makes gradients for it: trained, not kept fixed
        params = [p for p in module.parameters() if p.is_floating_point()]
        if not params:
            return None
        return params  # a model an optimizer trains (a GAN's generator under no_grad for D's step) moves

    def _look(self, info: ModelInfo) -> None:
        if not self.s.armed or self._candidate(info, forward=True) is None:
            return
        self.seen[id(info)] = (self.s.step, user_location(4) or "")

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._look(info)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        self._look(info)

    def after_checked_step(self, oi: OptInfo) -> None:
        """A step followed the forward: the fixed model was used in training, not evaluated."""
        seen, self.seen = self.seen, {}
        clock = sum(o.steps for o in self.s.optimizers.values())
        for key, (_, loc) in seen.items():
            info = next((i for i in self.s.models.values() if id(i) == key), None)
            if info is None:
                continue
            params = self._candidate(info)
            if params is None:
                continue
            sample = weight_sample(params, sums=True)
            first = self.first.get(key)
            if first is None or first[1].shape != sample.shape:
                self.first[key] = (clock, sample)
                continue
            if clock - first[0] < SPAN:
                continue
            moved = (sample - first[1]).abs().amax().reshape(1)
            self.s.defer(moved, self._judge(info, loc, clock - first[0]))

    def _judge(self, info: ModelInfo, loc: str, steps: int):
        def callback(vals: list[float]) -> None:
            if id(info) in self.done:
                return
            if vals[0] != 0.0:
                self.done.add(id(info))  # its weights move: an EMA/momentum target, trained on purpose
                return
            active = [m for m in info.dropbn if m.training]
            if not active:
                return
            self.done.add(id(info))
            names = first_names([f"{info.label(m)} ({type(m).__name__})" for m in active], 4)
            has_bn = any(m in info.bns for m in active)
            has_drop = any(m not in info.bns for m in active)
            effects = []
            if has_drop:
                effects.append("its Dropout keeps zeroing units, so the outputs it gives the training are random")
            if has_bn:
                effects.append("its BatchNorm normalises with each batch's statistics and overwrites the running "
                               "statistics it was trained with")
            msg = (f"{info.name} runs forward in training mode while another model trains"
                   f"{' (at ' + loc + ')' if loc else ''}, but its own weights stay fixed: they did not change over "
                   f"{steps} optimizer steps (a pretrained teacher or a frozen feature extractor). {len(active)} "
                   f"Dropout/BatchNorm module(s) are in training mode: {names}: "
                   + "; ".join(effects) + ". The fixed model then changes under the run and its outputs are not "
                   "the ones it was trained to give.")
            fix = ("call .eval() on this model once after building or loading it (e.g. teacher.eval(); "
                   "requires_grad_(False) and torch.no_grad() do not switch Dropout and BatchNorm to eval mode), "
                   "and keep it in eval mode when the trained model goes back to train().")
            self.s.report("frozen-model-in-train-mode", msg, where=f"{info.name} forward at {loc or '?'}", fix=fix,
                          key=info.name)

        return callback

    def remove_hooks(self) -> None:
        self.seen.clear()
        self.first.clear()
