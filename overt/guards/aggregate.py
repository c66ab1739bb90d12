"""Guard on a model set to an "average" of copies trained from it that grows beyond every copy (slug
``average-diverges-from-model``, widened from a shadow of the trained model to the trained model as the average of
its copies: federated averaging, local SGD; issue 33).

An invariant of every program that trains copies of a model and sets the model to their average (FedAvg, local
SGD, model soups, DiLoCo's outer step at its usual rates): a weighted mean ``sum_c a_c W_c`` with ``a_c >= 0``
summing to 1 has a norm of at most ``max_c |W_c|`` (the triangle inequality).  Coefficients that sum to more than
one (``client_subset * w / num_clients`` where ``w / client_subset`` was meant, ssg-research/WAFFLE#6) rescale the
global model at every round: nothing fails until the weights overflow.

Observed on the values, whatever the code's form: every optimizer's first step is a checked one (the warm-up of its
own clock; a new optimizer's very first step is seen only while some optimizer's step is checked, else its second
is); there its parameters' strided sample is kept on the device (the copy's starting weights) with their shapes, and
after each of its checked steps the sample again (the copy's latest weights).  At a checked step of an
optimizer ``G`` over parameters of the same shapes, the copies whose first step came after ``G``'s previous checked
step are the candidates: when there are at least :data:`MIN_COPIES`, every one started from ``G``'s weights before this
step (its first weights seen lie within :data:`DERIVED` of ``G``'s norm from them: a copy of ``G``, one step in at
most), ``G``'s weights then were within :data:`NEAR` times the largest copy's norm, and
after the step ``G``'s norm exceeds :data:`GROW` times the largest copy's, that step was no average of them.  One
deferred read per step; reported when it holds at :data:`ROUNDS` checked steps of ``G``.  Nothing runs on other
steps.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.samples import weight_sample
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

SLUG = "average-diverges-from-model"
MAX_PARAMS = 64  # parameter tensors sampled per optimizer
MAX_COPIES = 256  # copies remembered per architecture
MAX_CANDS = 64  # the latest copies compared at one step
MIN_COPIES = 2  # copies trained since the model's previous checked step
GROW = 2.0  # the model's norm after its step, over the largest copy's
DERIVED = 0.25  # a copy's first weights seen lie within this share of the model's norm from the model's weights
NEAR = 1.5  # the model's norm before its step, at most this over the largest copy's
ROUNDS = 2  # checked steps of the model at which it holds


def _params(oi: OptInfo) -> list[torch.Tensor]:
    return [p for p in oi.params if p.is_floating_point() and p.numel()][:MAX_PARAMS]


class _Copy:
    __slots__ = ("oi", "start", "last", "seq")

    def __init__(self, oi: OptInfo, start: torch.Tensor, seq: int) -> None:
        self.oi = id(oi)
        self.start = start  # sample before its first step
        self.last = start  # sample after its latest checked step
        self.seq = seq  # when it first stepped


class AggregateChecks(Check):
    name = "aggregate"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seq = 0
        self.copies: dict[tuple, deque[_Copy]] = {}  # shapes -> copies by first step
        self.mine: dict[int, _Copy] = {}  # id(optimizer info) -> its record
        self.shapes: dict[int, tuple] = {}
        self.prev: dict[int, int] = {}  # id(G) -> self.seq at its previous checked step
        self.pending: dict[int, tuple] = {}  # id(G) -> (old sample, candidates, where) of the step under way
        self.hits: dict[int, int] = {}
        self.done: set[int] = set()

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if id(oi) in self.done:
            return
        key = self.shapes.get(id(oi))
        if key is None:
            params = _params(oi)
            if not params:
                return
            key = self.shapes[id(oi)] = tuple(tuple(p.shape) for p in params)
        self.seq += 1
        if oi.steps <= 1 and id(oi) not in self.mine:  # its first step seen: where the copy starts
            try:
                start = weight_sample(_params(oi))
            except RuntimeError:
                return
            rec = self.mine[id(oi)] = _Copy(oi, start, self.seq)
            self.copies.setdefault(key, deque(maxlen=MAX_COPIES)).append(rec)
        since = self.prev.get(id(oi), 0)
        self.prev[id(oi)] = self.seq
        same = self.copies.get(key)
        if not same or len(same) <= MIN_COPIES:
            return  # no other optimizer of this architecture: nothing to compare (no device work)
        cands = [c for c in same if c.seq > since and c.oi != id(oi)][-MAX_CANDS:]
        if len(cands) >= MIN_COPIES:
            try:
                now = weight_sample(_params(oi))
            except RuntimeError:
                return
            self.pending[id(oi)] = (now, cands, user_location(skip=3))

    def after_checked_step(self, oi: OptInfo) -> None:
        rec = self.mine.get(id(oi))
        params = None
        if rec is not None and len(self.copies.get(self.shapes.get(id(oi)), ())) > 1:
            params = _params(oi)
            try:
                rec.last = weight_sample(params)
            except RuntimeError:
                pass
        look = self.pending.pop(id(oi), None)
        if look is None or id(oi) in self.done:
            return
        old, cands, where = look
        params = params or _params(oi)
        try:
            new = weight_sample(params)
        except RuntimeError:
            return
        if any(c.start.shape != old.shape or c.start.device != old.device for c in cands):
            return
        with torch.no_grad():
            derived = torch.stack([(c.start - old).norm() <= DERIVED * old.norm() for c in cands]).all()
            top = torch.stack([c.last.norm() for c in cands]).max()
            grown = new.norm() / top.clamp_min(1e-30)
            near = old.norm() <= NEAR * top
            ok = derived & near & (grown > GROW) & new.isfinite().all()
        n = len(cands)

        def judge(vals: list[float]) -> None:
            if not vals[0] or id(oi) in self.done:
                return
            self.hits[id(oi)] = self.hits.get(id(oi), 0) + 1
            if self.hits[id(oi)] >= ROUNDS:
                self.done.add(id(oi))
                self._report(oi, n, vals[1], where)

        self.s.defer(torch.stack((ok.double(), grown.double())), judge)

    def _report(self, oi: OptInfo, n: int, grown: float, where: str | None) -> None:
        at = f" at {where}" if where else ""
        self.s.report(
            SLUG,
            f"the step{at} set the parameters of {oi.name} from {n} copies trained from its own weights since its "
            f"previous checked step, to weights {grown:.3g} times the norm of the largest copy, and did so at "
            f"{ROUNDS} checked steps: an average of the copies (coefficients >= 0 summing to 1) is never larger than "
            "the largest of them, so the aggregation's coefficients sum to more than one and the model is rescaled "
            "at every round until its weights overflow.",
            fix="weight each copy by its share (n_c / sum of n_c over the copies combined, or 1 / number combined) "
            "so the coefficients sum to 1; check sum(coefficients) == 1 where the average is formed.",
            where=f"{oi.name} step" + at, key=f"aggregate:{oi.name}",
        )
