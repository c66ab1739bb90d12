"""Guard on a loss that compares a quantity with itself (slug ``loss-compares-itself``; issue 33).

An invariant of training: a loss term measures a distance between two *different* quantities (a
prediction and its target, a student and its teacher).  When both arguments are the same quantity
-- the teacher's logits on both sides of a distillation loss, ``kl_div(log_softmax(t), softmax(t))``,
``mse_loss(x, x.detach())`` -- the term is constant (zero), gives the model no gradient and trains
nothing, while the total loss, summed with other terms, looks normal.

Seen on checked steps, for ``F.kl_div`` (``KLDivLoss``) and the regression losses whose two sides are
provably one quantity's -- they share storage (``x`` and ``x.detach()``), or neither has a gradient
path to a trainable parameter (both computed under ``no_grad`` or detached: the term can train
nothing whatever its value), or exactly one of them carries a gradient and they are equal from the
call site's first checked call on, taken among the run's first ``EARLY`` optimizer steps.  A
prediction can come to equal its target by fitting it, but not before training: equal from the
start, the target was built from the model's own output (value targets summed as ``advantages +
values`` from an advantage buffer that still holds the zeros it was allocated with; a target that
adds to the prediction a correction nobody filled).  A site first seen later, or unequal once, is
left alone (a fit reached by training is not a bug).  On the device: the largest difference between the two
sides (``exp(input)`` against the target for ``kl_div`` without ``log_target``) relative to their
scale.  Reported, once per call site, when the two sides agree on every checked call of
``SAME_CALLS`` or more, over at least ``SPAN`` optimizer steps (all optimizers counted): a term that
stays equal, not one equal by chance at a step.  One checked call whose sides differ silences the site for good.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

SAME_CALLS = 3
SPAN = 8
TOL = 1e-6
EARLY = 8  # optimizer steps (all optimizers): a prediction this early cannot have fitted its target
LOSSES = ("kl_div", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
REGRESSION = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")  # a prediction against a target it may be built from


class SelfLossChecks(Check):
    name = "selfloss"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.same: dict[str, list[int]] = {}  # call site -> the steps whose checked call compared equal sides
        self.done: set[str] = set()
        self.first: dict[str, int] = {}  # call site -> the optimizer clock at its first checked call
        self.outputs: dict[str, set[float]] = {}  # call site -> the sums of the prediction on its equal calls

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in LOSSES or not inp.is_floating_point() or not target.is_floating_point():
            return
        if inp.shape != target.shape or not inp.numel() or inp.device != target.device:
            return
        shared = inp.untyped_storage().data_ptr() == target.untyped_storage().data_ptr()
        both = inp.requires_grad and target.requires_grad
        if not shared and both:
            return  # two quantities that both train: not provably one
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        clock = sum(oi.steps for oi in self.s.optimizers.values())  # moves with any optimizer's steps
        one_side = not shared and (inp.requires_grad or target.requires_grad)
        if one_side and (name not in REGRESSION or self.first.setdefault(loc, clock) > EARLY):
            # a divergence between two models' distributions may be zero from the start and stay zero (two copies of
            # one initialisation trained alike, as in mutual learning); first seen after training began, an equal
            # prediction may be a fit
            self.done.add(loc)
            return
        a, b = inp.detach().float(), target.detach().float()
        if name == "kl_div" and not kwargs.get("log_target", args[5] if len(args) > 5 else False):
            a = a.exp()
        diff = (a - b).abs().amax()
        scale = torch.maximum(a.abs().amax(), b.abs().amax())
        grads = torch.tensor([float(inp.requires_grad), float(target.requires_grad)], device=diff.device)
        moved = a.sum()  # the prediction's fingerprint: a model whose output never changes may fit a constant exactly
        self.s.defer(torch.cat((torch.stack((diff, scale)), grads, moved.reshape(1))),
                     self._judge(name, loc, clock, shared))

    def _judge(self, name: str, loc: str, clock: int, shared: bool):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            diff, scale, inp_grad, target_grad, moved = vals
            if not diff <= TOL * max(scale, 1.0):
                self.done.add(loc)  # the sides differ: a real distance
                return
            steps = self.same.setdefault(loc, [])
            steps.append(clock)
            self.outputs.setdefault(loc, set()).add(moved)
            if len(steps) >= SAME_CALLS and steps[-1] - steps[0] >= SPAN:
                grad = bool(inp_grad or target_grad)
                if grad and not shared and len(self.outputs[loc]) < 2:
                    return  # the prediction never changed: a model that fits a constant target exactly from its
                    # initialisation (nothing to learn) is not a target built from its output; wait for a change
                self.done.add(loc)
                self._report(name, loc, len(steps), grad, shared)

        return callback

    def _report(self, name: str, loc: str, n: int, grad: bool, shared: bool) -> None:
        side = "exp(input) equals the target" if name == "kl_div" else "the input equals the target"
        if grad and not shared:
            self._report_own_output(name, loc, n, side)
            return
        graph = ("" if grad else " Neither argument has a gradient path to a trainable parameter (both were computed "
                 "under no_grad or detached).")
        msg = (f"F.{name} at {loc} compares a quantity with itself: on each of {n} checked calls {side}, so the "
               "term is constant at its minimum and gives the model no gradient: it "
               f"trains nothing while the total loss looks normal.{graph} A distillation loss that takes the teacher's "
               "output on both sides does this.")
        fix = ("pass the model's own output as the input: e.g. F.kl_div(F.log_softmax(student_logits / T, dim=1), "
               "F.softmax(teacher_logits / T, dim=1)), with the teacher's output only as the target.")
        self.s.report("loss-compares-itself", msg, where=f"F.{name} call at {loc}", fix=fix, key=loc)

    def _report_own_output(self, name: str, loc: str, n: int, side: str) -> None:
        first = self.first.get(loc, 0)
        msg = (f"F.{name} at {loc} compares the model's output with itself: {side} on each of {n} checked calls, "
               f"from the first (optimizer step {first}), while one side carries gradients. A prediction can fit its "
               "target by training, not before it: the target was built from the model's own output, so the term is "
               "at its minimum with zero gradient and the part of the model it should train never learns while the "
               "run looks normal. Value targets computed as advantages + values from an advantage buffer that still "
               "holds the zeros it was allocated with (the advantages written elsewhere) do this, as does any target "
               "that adds to the model's detached prediction a correction never filled.")
        fix = ("build the target from the quantities actually computed (returns = advantages + values with the "
               "advantages just written, or r + gamma * V(s')), and read a preallocated buffer only after it is filled.")
        self.s.report("loss-compares-itself", msg, where=f"F.{name} call at {loc}", fix=fix, key=loc)
