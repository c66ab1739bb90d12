"""Guard on a pruning (or a quantisation) that zeroes every weight of one sign (slug ``pruning-removes-one-sign``;
issue 33).

An invariant of every weight pruning: the criterion is a magnitude, a movement, a gradient saliency or chance, and
none of them cares about a weight's sign (a weight's sign is a convention of the layer: negating a unit's incoming
and outgoing weights changes nothing).  So where the trained weights had both signs, the weights a pruning keeps
have both signs too.  A score taken on the signed weight (``score = w`` where ``w.abs()`` was meant, a ``topk`` of
the weight for "largest") keeps the largest positive weights and removes every large negative one; an unsigned
8-bit quantisation of signed weights clamps every negative weight to 0 the same way.

What is proven, with no work on unchecked steps: on the first checked step after the warm-up, for each trained
weight of two or more dimensions (up to :data:`MAX_PARAMS`), the fractions of its elements that are negative,
positive and exactly zero (read with the next checked step).  At the end of the run, a weight that then had at
least :data:`MIN_NEGATIVE` of each sign and almost no zeros, and now has at least :data:`MIN_ZEROS` exact zeros
(something set them), is reported when its non-zero survivors lie on one side: the smaller of their extremes' sizes
is below :data:`ONE_SIDE` of the larger (a magnitude pruning keeps both tails: about 0.7-1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo

MAX_PARAMS = 64
MIN_NEGATIVE = 0.2  # of the elements, at training time, on each side of zero
MAX_TRAINING_ZEROS = 0.05
MIN_ZEROS = 0.2  # exact zeros at the end
ONE_SIDE = 0.1
MIN_SURVIVORS = 64


class PruneSignChecks(Check):
    name = "prunesign"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.seen = False
        self.training: dict[int, tuple[torch.Tensor, str, float, float, float]] = {}  # id -> (param, name, fracs)

    def after_checked_step(self, oi: OptInfo) -> None:
        if self.seen or self.s.step < self.s.options.warmup_steps:
            return
        self.seen = True
        params = [p for p in oi.params if p.dim() >= 2 and p.is_floating_point() and p.numel() >= MIN_SURVIVORS]
        params = params[:MAX_PARAMS]
        if not params:
            return
        with torch.no_grad():
            rows = [torch.stack(((p < 0).sum(), (p > 0).sum(), (p == 0).sum())) for p in params]
            counts = torch.stack(rows).flatten().to(torch.float64)
        names = [self.s.name_of(p) for p in params]

        def callback(vals: list[float]) -> None:
            for i, p in enumerate(params):
                n = float(p.numel())
                neg, pos, zero = vals[3 * i] / n, vals[3 * i + 1] / n, vals[3 * i + 2] / n
                self.training[id(p)] = (p, names[i], neg, pos, zero)

        self.s.defer(counts, callback)

    def end_of_run(self) -> None:
        for p, name, neg, pos, zero in list(self.training.values()):
            if min(neg, pos) < MIN_NEGATIVE or zero > MAX_TRAINING_ZEROS:
                continue
            with torch.no_grad():
                w = p.detach()
                zeros = float((w == 0).float().mean())
                if zeros < MIN_ZEROS:
                    continue
                kept = w[w != 0]
                if kept.numel() < MIN_SURVIVORS:
                    continue
                lo, hi = float(kept.min()), float(kept.max())
            small, large = sorted((abs(lo), abs(hi)))
            if large > 0 and small / large < ONE_SIDE:
                self._report(name, neg, pos, zeros, lo, hi)

    def _report(self, name: str, neg: float, pos: float, zeros: float, lo: float, hi: float) -> None:
        kept_sign = "positive" if abs(hi) >= abs(lo) else "negative"
        lost = "negative" if kept_sign == "positive" else "positive"
        msg = (f"{name} ends the run with {zeros:.0%} of its elements set to exactly zero, and the weights it keeps "
               f"are all {kept_sign} or within a sliver of zero (the kept values run from {lo:.3g} to {hi:.3g}), "
               f"while during training {neg:.0%} of its weights were negative and {pos:.0%} positive: every large "
               f"{lost} weight was removed. No pruning criterion depends on a weight's sign (magnitude, movement, "
               "saliency and random pruning keep both tails), so the weights were selected by their signed value: "
               "a magnitude score taken without abs(), or a topk/sort of the signed weight for 'largest', or a "
               "quantisation to an unsigned type that clamps every weight of one sign to zero. The pruned network "
               "has lost its most important weights of one sign.")
        fix = ("score the weights by their magnitude: score = w.abs() (or torch.nn.utils.prune.l1_unstructured), "
               "and keep the elements with the largest scores; quantise signed weights to a signed type (qint8).")
        self.s.report("pruning-removes-one-sign", msg, where=name, fix=fix, key=name)


__all__ = ["PruneSignChecks"]
