"""Guard on distillation targets that belong to other samples (slug ``soft-targets-misaligned``; issue 33).

An invariant of knowledge distillation: the teacher's soft targets for a batch are the teacher's
opinion of *that* batch, so a teacher that learnt the task mostly agrees with the batch's labels.
Teacher outputs computed once in one order and replayed in another (precomputed over a shuffled
loader and looked up by batch index, a cache indexed by position after the data was reshuffled)
pair every sample with another sample's soft targets: they agree with the labels at chance level,
and the student is distilled towards noise (haitongli/knowledge-distillation-pytorch#16/#17: "the
teacher's output disagree with batch's labels ... compare the argmax index with label").

Seen on checked steps with gradients enabled, when one step computes both soft targets -- an
``F.kl_div`` (``KLDivLoss``) whose target is ``(N, C)`` probabilities (log-probabilities with
``log_target``), or a cross-entropy with ``(N, C)`` probability targets -- and a cross-entropy
(``F.cross_entropy``/``F.nll_loss``) with ``(N, C)`` inputs and ``N`` class indices, with the same ``N``
and ``C >= 3``.  On the device: the share of the labelled samples (a label in ``[0, C)``, so not an
``ignore_index``) whose target's most probable class is their label, and the targets' mean top
probability.  Reported, once per soft-target call site, when after the warm-up on at least
``MIN_STEPS`` checked steps spread over ``SPAN`` optimizer steps the agreement was below ``2 / C``
while the targets were confident (mean top probability above ``1.5 / C``): a teacher with an opinion,
about other samples.  A flat teacher (untrained, or a peer that is still learning) and any step with
agreement of ``2 / C`` or more keep the site silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

MIN_STEPS = 3
SPAN = 8
_CE = ("cross_entropy", "nll_loss")


class SoftTargetChecks(Check):
    name = "softtargets"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.kd: tuple[int, torch.Tensor, torch.Tensor, int, str, str] | None = None  # step, argmax, top, C, site, loss
        self.ce: tuple[int, torch.Tensor, int, str] | None = None  # step, labels, C, site
        self.low: dict[str, list[int]] = {}  # kl_div site -> the clock (all optimizers' steps) of each call at chance
        self.done: set[str] = set()

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if self.s.step < self.s.options.warmup_steps:
            return
        step = sum(oi.steps for oi in self.s.optimizers.values())  # moves with any optimizer's steps
        if name == "kl_div":
            if target.dim() != 2 or not target.is_floating_point() or target.shape[1] < 3 or inp.shape != target.shape:
                return
            loc = self.s.losses.site() or "F.kl_div"
            if loc in self.done:
                return
            log_target = kwargs.get("log_target", args[5] if len(args) > 5 else False)
            t = target.detach().float()
            probs = t.exp() if log_target else t
            top, arg = probs.max(dim=1)
            self.kd = (step, arg, top.mean(), t.shape[1], loc, "F.kl_div")
        elif name == "cross_entropy" and target.is_floating_point():
            # a cross-entropy with probability targets is the soft-target form of distillation
            if target.dim() != 2 or target.shape[1] < 3 or inp.shape != target.shape:
                return
            loc = self.s.losses.site() or "F.cross_entropy"
            if loc in self.done:
                return
            top, arg = target.detach().float().max(dim=1)
            self.kd = (step, arg, top.mean(), target.shape[1], loc, "F.cross_entropy")
        elif name in _CE:
            if inp.dim() != 2 or target.dim() != 1 or target.is_floating_point() or inp.shape[1] < 3:
                return
            self.ce = (step, target.detach(), inp.shape[1], self.s.losses.site() or f"F.{name}")
        else:
            return
        kd, ce = self.kd, self.ce
        if kd is None or ce is None or kd[0] != step or ce[0] != step or kd[3] != ce[2] \
                or kd[1].shape != ce[1].shape or kd[1].device != ce[1].device:
            return
        self.kd = self.ce = None
        labels = ce[1]
        valid = (labels >= 0) & (labels < kd[3])  # ignore_index (-100) and padding labels are no class
        agree = ((kd[1] == labels) & valid).sum().float() / valid.sum().clamp(min=1).float()
        self.s.defer(torch.stack((agree, kd[2].to(agree.device))), self._judge(kd[4], ce[3], kd[3], step, kd[5]))

    def _judge(self, loc: str, ce_loc: str, classes: int, step: int, what: str):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            agree, top = vals
            if top <= 1.5 / classes:
                return  # a flat teacher says nothing about the labels
            if agree >= 2.0 / classes:
                self.done.add(loc)  # the targets follow the labels: aligned
                return
            steps = self.low.setdefault(loc, [])
            steps.append(step)
            if len(steps) >= MIN_STEPS and steps[-1] - steps[0] >= SPAN:
                self.done.add(loc)
                self._report(what, loc, ce_loc, classes, agree, top, len(steps))

        return callback

    def _report(self, what: str, loc: str, ce_loc: str, classes: int, agree: float, top: float, n: int) -> None:
        msg = (f"the soft targets given to {what} at {loc} do not belong to the batch's samples: on {n} checked "
               f"steps their most probable class was the label of the cross-entropy at {ce_loc} for only "
               f"{agree:.0%} of the samples (chance for {classes} classes: {1 / classes:.0%}), while the targets "
               f"are confident (mean top probability {top:.2f}). A teacher that learnt the task agrees with the "
               "labels on most samples; targets from other samples (outputs computed once and replayed in another "
               "order, a cache indexed by batch position after the loader reshuffled) distil the student towards "
               "noise.")
        fix = ("compute the teacher's output on the batch at hand (with torch.no_grad(): t = teacher(x)), or store "
               "precomputed outputs by sample index and look them up with the batch's own indices.")
        self.s.report("soft-targets-misaligned", msg, where=f"{what} call at {loc}", fix=fix, key=loc)
