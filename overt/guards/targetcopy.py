"""Guard on a regression whose target is the model's own input (slug ``regression-target-is-input``; issue 33).

An invariant of supervised regression: the target is something the model has to work out, not one of
the tensors it is given.  A model asked to output one of its own inputs learns the identity -- any
network of a few layers does in a few hundred steps -- and the loss falls to almost nothing while the
model learns none of what the objective meant: a diffusion model's noise predictor regressed on the
noisy input ``x_t`` instead of the noise (irom-princeton/dppo#14), a denoiser trained to reproduce its
noisy input instead of the clean signal, a predictor given the value it is asked for.

Seen on checked steps, for the regression losses (``F.mse_loss``, ``l1_loss``, ``smooth_l1_loss``,
``huber_loss`` and the ``nn`` modules that call them): the target is a tensor argument of a watched model's
training forward on this step -- the very memory (the same storage, offset and shape), or a copy with the
same values everywhere (``.clone()``, another dtype or device; read with the deferred reads) -- and the
loss's input is that forward's output (or a view of it).  An
autoencoder is written this way too; what tells them apart is measured, not assumed: the error relative
to the target's spread (the mean squared error over the variance of the target's values, read with the
session's deferred reads).  A model with a bottleneck cannot reproduce its input to a thousandth of its
variance; one that does has learned to copy it.  Reported, once per call site, when the relative error
is below ``COPIED`` (``COPIED_GIVEN_MORE`` when the forward was given other tensors besides the target: a
diffusion model's timestep, a condition) on ``CALLS`` checked calls in a row spanning at least ``SPAN``
optimizer steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.watched import output_tensors

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
COPIED = 1e-3  # mean squared error over the target's variance at and below which the output is a copy
COPIED_GIVEN_MORE = 1e-2  # the same when the forward was given other inputs besides the target (a timestep)
CALLS = 3  # checked calls in a row
SPAN = 20  # optimizer steps those calls span, at least
MAX_FORWARDS = 16  # forwards of a step remembered
MAX_UP = 6  # nodes walked from the loss's input to the forward's output (views, squeeze, ...)
_VIEWS = ("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "SqueezeBackward0", "SqueezeBackward1",
          "UnsqueezeBackward0", "CloneBackward0", "SliceBackward0", "SelectBackward0", "ToCopyBackward0",
          "TBackward0", "TransposeBackward0", "PermuteBackward0")


def _key(t: torch.Tensor) -> tuple[int, int, tuple[int, ...]] | None:
    """What identifies a tensor's memory: (storage address, offset, shape)."""
    try:
        return t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape)
    except Exception:  # noqa: BLE001  a tensor without storage
        return None


class TargetCopyChecks(Check):
    name = "targetcopy"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        # forwards whose output is not known yet: (model, the tensors it was given)
        self.pending: list[tuple[ModelInfo, list[torch.Tensor]]] = []
        self.outputs: dict[int, tuple[Any, ModelInfo, list[torch.Tensor]]] = {}  # id(output grad_fn) -> (it, ...)
        self.runs: dict[str, list[int]] = {}  # call site -> optimizer clock of its copied calls in a row
        self.done: set[str] = set()
        self.at = -1  # the step whose graph nodes outputs holds

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.at != self.s.step:  # this step's graph nodes only (graph-leak): see termscale._this_step
            self.pending.clear()
            self.outputs.clear()
            self.at = self.s.step
        if len(self.pending) + len(self.outputs) < MAX_FORWARDS:
            self.pending.append((info, [a for a in args[:4] if isinstance(a, torch.Tensor)]))

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if not self.pending or self.pending[-1][0] is not info:
            return
        _, given = self.pending.pop()
        if failed or not given:
            return
        for t in output_tensors(output):
            if t.grad_fn is not None:
                self.outputs[id(t.grad_fn)] = (t.grad_fn, info, given)

    def after_checked_step(self, oi: OptInfo) -> None:
        self.pending.clear()
        self.outputs.clear()

    def remove_hooks(self) -> None:
        self.pending.clear()
        self.outputs.clear()

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in LOSSES or not self.outputs or not isinstance(target, torch.Tensor):
            return
        if target.requires_grad or not target.is_floating_point() or target.numel() < 2 or inp.shape != target.shape:
            return
        made = self._forward_of(inp)
        if made is None:
            return
        given = [a for a in made[1] if a.shape == target.shape and a.is_floating_point() and not a.requires_grad]
        if not given:
            return  # no tensor the forward that predicted was given can be the target
        k = _key(target)
        same = next((a for a in given if _key(a) == k), None) if k is not None else None
        loc = self.s.losses.locs.get(name) or f"F.{name}"
        if loc in self.done:
            return
        a, b = inp.detach().float(), target.detach().float()
        err = (a - b).pow(2).mean()
        spread = b.var()
        # the target is the input itself (its memory), or a copy of it (clone, another dtype or device): read
        # whether their values differ anywhere
        if same is not None:
            apart = torch.zeros_like(err)
        else:
            apart = (given[0].detach().to(b.device, torch.float32) - b).abs().amax()
        clock = sum(oi.steps for oi in self.s.optimizers.values())
        limit = COPIED_GIVEN_MORE if len(made[1]) > 1 else COPIED
        self.s.defer(torch.stack((err, spread, apart)), self._judge(name, loc, clock, made[0], limit))

    def _forward_of(self, inp: torch.Tensor) -> tuple[ModelInfo, list[torch.Tensor]] | None:
        fn = inp.grad_fn
        for _ in range(MAX_UP):
            if fn is None:
                return None
            rec = self.outputs.get(id(fn))
            if rec is not None and rec[0] is fn:
                return rec[1], rec[2]
            if type(fn).__name__ not in _VIEWS or not fn.next_functions:
                return None
            fn = fn.next_functions[0][0]
        return None

    def _judge(self, name: str, loc: str, clock: int, info: ModelInfo, limit: float):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            err, spread, apart = vals
            if apart != 0 or not (spread > 0 and err <= limit * spread):
                self.runs.pop(loc, None)  # not a copy (yet): the run of copied calls starts again
                return
            run = self.runs.setdefault(loc, [])
            run.append(clock)
            if len(run) >= CALLS and run[-1] - run[0] >= SPAN:
                self.done.add(loc)
                self._report(name, loc, info, err / spread, len(run))

        return callback

    def _report(self, name: str, loc: str, info: ModelInfo, rel: float, n: int) -> None:
        model = info.name
        msg = (f"F.{name} at {loc} regresses {model}'s output on one of {model}'s own inputs: the target is the "
               f"tensor (or a copy of the tensor) passed to the forward that made the prediction, and on {n} checked "
               "calls in a row the "
               f"output reproduced it to {rel:.2g} of its variance. The model has learned to copy its input, which "
               "any network learns in a few steps, so the loss is near zero while it learns nothing the objective "
               "meant (a noise predictor trained on the noisy input instead of the noise, a denoiser trained to "
               "reproduce its noisy input instead of the clean signal).")
        fix = ("regress on the quantity the model must work out, not on its input: e.g. F.mse_loss(model(x_noisy, t), "
               "noise) for an epsilon-predicting diffusion model, the clean x for a denoiser.")
        self.s.report("regression-target-is-input", msg, where=f"F.{name} call at {loc}", fix=fix, key=loc)
