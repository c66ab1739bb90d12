"""Guards on learning-rate schedulers: their cadence (slug ``scheduler-cadence``) and the
optimizer they drive (slug ``scheduler-optimizer-idle``).

Schedulers are given explicitly or found when they step (through the
patched ``LRScheduler.step``).  At each
DataLoader epoch boundary the guard compares how many times each scheduler
and its optimizer stepped during the epoch with the scheduler's horizon.

``scheduler-optimizer-idle`` (issue 33, state that is supposed to move): a scheduler that keeps
stepping over an epoch in which its optimizer never stepped, while another optimizer did
(:data:`MIN_STEPS` steps or more): the optimizer was re-created (after unfreezing, a reload, model
surgery) and the scheduler still holds the old one, so the optimizer that trains keeps its
initial learning rate for the whole run.

A hand-written decay (no scheduler object) at the wrong cadence, e.g. a layer-wise decay factor
multiplied into ``group["lr"]`` at every step instead of once: at DataLoader epoch boundaries, a
parameter group whose learning rate was already below :data:`VANISHED` of its peak at the start of
an epoch of at least :data:`MIN_STEPS` optimizer steps, and still shrank (by half or more) during
it, while no scheduler drives that optimizer, is reported (``scheduler-cadence``).  A learning rate
set to exactly zero (a deliberate freeze) and a schedule that ends at zero are left alone.

``lr-lambda-returns-rate`` (issue 33, round three's w79): a ``LambdaLR`` or ``MultiplicativeLR``
whose function returns the learning rate itself instead of a factor.  Once per scheduler, when it is
first seen (its own first ``step()``, inside its constructor), the function is called at steps 0-3
(plain Python on numbers, no tensor): the premise is proven when, in every parameter group, its
value at step 0 equals the group's ``initial_lr`` (relative :data:`SAME`), that rate is below 0.5,
the values never rise over the first steps (a warm-up that happens to start at the rate rises), and
for ``MultiplicativeLR`` they are not constant (a constant factor equal to the rate may be a
deliberate decay).  Groups that carry their own rates (0.1 and 1.0, with a function that returns
the rate on purpose) match in one group at most: silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.optim import lr_scheduler as L

from overt.guards.check import Check
from overt.guards.lroverride import LrWrites
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

PER_BATCH = tuple(c for c in (getattr(L, "OneCycleLR", None), getattr(L, "CyclicLR", None)) if c)
PER_EPOCH = tuple(c for c in (L.StepLR, L.MultiStepLR, L.ExponentialLR, L.CosineAnnealingLR) if c)
MIN_STEPS = 4  # steps of another optimizer during an epoch in which the scheduler's own did none
SAME = 1e-6  # relative tolerance of "the lambda's value at step 0 is the group's initial rate"
VANISHED = 1e-6  # a learning rate below this fraction of its group's peak no longer trains anything


def horizon(s: Any) -> int | None:
    """Scheduler steps after which an epoch-based schedule has used up its first stage."""
    if isinstance(s, L.StepLR):
        return int(s.step_size)
    if isinstance(s, L.MultiStepLR):
        return min(s.milestones) if s.milestones else None
    if isinstance(s, L.CosineAnnealingLR):
        return int(s.T_max)
    if isinstance(s, L.ExponentialLR):
        return 0 if s.gamma < 0.999 else None
    return None


class SchedulerChecks(Check):
    """Fed by the patched ``LRScheduler.step`` (:meth:`add`) and the start of every
    DataLoader pass (:meth:`epoch_boundary`), both in :mod:`overt.guards.patches`."""

    name = "scheds"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.watched: list[list[Any]] = []  # [scheduler, OptInfo, sched_count_at_epoch_start, opt_steps_at_epoch_start]
        self.ids: set[int] = set()
        self.any_sched: list[list[Any]] = []  # [scheduler, its optimizer, sched_count, other_steps] of every scheduler
        self.any_ids: set[int] = set()
        self.sites: dict[int, str] = {}  # id(scheduler) -> the user's line where it was first seen stepping
        self.first: dict[int, tuple[int, int]] = {}  # id(scheduler) -> (last_epoch, its optimizer's steps) when found
        self.lrs: dict[int, tuple[int, list[float], list[float]]] = {}  # id(OptInfo) -> (steps, lrs, peaks)
        self.writes = LrWrites(session)  # lr-overwritten-by-scheduler (lroverride.py)

    def add(self, scheduler: Any) -> None:
        """Watch ``scheduler`` (given explicitly, or seen stepping through the patched ``LRScheduler.step``)."""
        opt = getattr(scheduler, "optimizer", None)
        if scheduler is not None and opt is not None and id(scheduler) not in self.any_ids:
            self.any_ids.add(id(scheduler))
            self.sites[id(scheduler)] = user_location(2) or ""
            last = getattr(scheduler, "last_epoch", None)  # (add runs before the step that found it: its count after)
            if isinstance(last, int):
                self.first[id(scheduler)] = (last + 1, self._steps(opt))
            self.any_sched.append([scheduler, opt, getattr(scheduler, "last_epoch", 0), self._steps(opt),
                                   self._others()])
            self._rate_lambda(scheduler)
        if scheduler is None or not isinstance(scheduler, PER_BATCH + PER_EPOCH) or id(scheduler) in self.ids:
            return
        opt = getattr(scheduler, "optimizer", None)
        oi = self.s.optimizers.get(id(opt)) if opt is not None else None
        if oi is None:
            if self.s.auto and opt is not None:
                oi = self.s.add_optimizer(opt)
            else:
                return
        self.ids.add(id(scheduler))
        self.watched.append([scheduler, oi, scheduler.last_epoch, oi.steps])

    def _rate_lambda(self, sc: Any) -> None:
        """``lr-lambda-returns-rate``: a LambdaLR/MultiplicativeLR function whose value is the rate itself,
        in every parameter group (groups that carry their own rates, 0.1 and 1.0 with a function that
        returns the rate on purpose, match in one group at most)."""
        multiplicative = isinstance(sc, L.MultiplicativeLR)
        if not isinstance(sc, (L.LambdaLR, L.MultiplicativeLR)):
            return
        groups = list(getattr(sc.optimizer, "param_groups", ()))
        fns = list(getattr(sc, "lr_lambdas", ()))
        if not groups or len(fns) != len(groups):
            return
        for fn, group in zip(fns, groups):
            base = group.get("initial_lr")
            if not isinstance(base, float) or not 0 < base < 0.5:
                return
            try:
                values = [fn(k) for k in range(4)]
            except Exception:  # noqa: BLE001 - the user's function: whatever it does, nothing is proven
                return
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                return  # a tensor (reading it could synchronise) or anything else: nothing proven
            if abs(float(values[0]) - base) > SAME * base or any(b > a for a, b in zip(values, values[1:])):
                return
            if multiplicative and len(set(values)) == 1:
                return
        base = float(groups[0]["initial_lr"])
        name = type(sc).__name__
        site = user_location(2)
        effect = (f"every step multiplies the rate by it again, so it falls as {base:.3g} x {base:.3g}^n and "
                  "is gone after a few steps" if multiplicative else
                  f"the rate is applied twice and training runs at {base:.3g} x {base:.3g} = {base * base:.3g}")
        which = "the learning rate itself" if len(groups) == 1 else f"each of the {len(groups)} groups' own rate"
        self.s.report(
            "lr-lambda-returns-rate",
            f"the function given to {name} returns {base:.3g} at step 0, which is {which}: {name} multiplies "
            f"the optimizer's rate by the value the function returns (a factor), so {effect}.",
            fix="return the factor alone, e.g. lambda it: (1 - it / max_iter) ** 0.9 instead of "
            "lambda it: base_lr * (1 - it / max_iter) ** 0.9",
            where=site or f"{name} on {type(sc.optimizer).__name__}", key=f"lambda:{id(sc)}",
        )

    def _steps(self, opt: Any) -> int:
        oi = self.s.optimizers.get(id(opt))
        return oi.steps if oi is not None else 0

    def _others(self) -> int:
        return sum(oi.steps for oi in self.s.optimizers.values())

    def _idle_optimizers(self) -> None:
        """Counts since the scheduler's optimizer last stepped (any cadence: a per-epoch scheduler stepped
        after validation falls between two DataLoader passes of its own).  Only the scheduler's steps taken
        after another optimizer began to step count: while no optimizer has stepped since its own last did,
        its steps end its own training (the epoch-end step after the last epoch, before a new optimizer and
        scheduler are built for the next fit) and are absorbed at the next DataLoader pass."""
        for entry in self.any_sched:
            sc, opt, sched0, own0, all0 = entry
            count = getattr(sc, "last_epoch", 0)
            own, total = self._steps(opt), self._others()
            if own != own0:  # the scheduler's optimizer steps: it trains, count from here
                entry[2], entry[3], entry[4] = count, own, total
                continue
            n_sched, n_others = count - sched0, total - all0
            if n_others == 0:  # nothing trained since its optimizer's last step: the scheduler's steps so far
                entry[2] = count  # closed that training (the step after the last epoch), not another's
                continue
            if n_sched < 1 or n_others < MIN_STEPS:
                continue
            name = type(sc).__name__
            groups = {id(g) for g in getattr(opt, "param_groups", ())}
            stepping = [oi for oi in self.s.optimizers.values() if oi.opt is not opt and oi.steps]
            if any(id(g) in groups for oi in stepping for g in oi.opt.param_groups):
                continue  # a wrapper sharing the groups (accelerate's AcceleratedOptimizer): the schedule trains
            if not stepping:
                continue
            idle = self.s.optimizers.get(id(opt))
            if idle is None and not self.s.auto:
                continue  # an optimizer not given to overt.guard may well step: nothing proven
            idle_name = idle.name if idle is not None else f"{type(opt).__name__} (never stepped)"
            others = ", ".join(oi.name for oi in stepping)
            self.s.report(
                "scheduler-optimizer-idle",
                f"{name} stepped {n_sched} time(s) while its optimizer {idle_name} did not step once and {others} "
                f"stepped {n_others} time(s): the scheduler changes the learning rate of an "
                "optimizer that no longer trains (it was replaced after the scheduler was made), so the optimizer "
                "that trains keeps its initial learning rate for the whole run.",
                fix="create the scheduler again whenever the optimizer is re-created (after unfreezing, reloading "
                "or changing the model), from the new optimizer.",
                where=f"{name} on {idle_name}", key=f"idle:{id(sc)}",
            )

    def _vanishing_lrs(self) -> None:
        """Parameter groups whose learning rate keeps shrinking, epoch after epoch, far below its peak,
        on an optimizer no scheduler drives: a hand-written decay applied at every step."""
        for oi in list(self.s.optimizers.values()):
            lrs = [g.get("lr") for g in oi.opt.param_groups]
            if not all(isinstance(v, (int, float)) for v in lrs):
                continue  # a tensor learning rate: reading it could synchronise
            lrs = [float(v) for v in lrs]
            prev = self.lrs.get(id(oi))
            if prev is None or len(prev[1]) != len(lrs):
                self.lrs[id(oi)] = (oi.steps, lrs, list(lrs))
                continue
            steps0, lrs0, peaks = prev
            peaks = [max(p, v) for p, v in zip(peaks, lrs)]
            self.lrs[id(oi)] = (oi.steps, lrs, peaks)
            if oi.steps - steps0 < MIN_STEPS or any(entry[1] is oi.opt for entry in self.any_sched):
                continue
            for i, (lr, lr0, peak) in enumerate(zip(lrs, lrs0, peaks)):
                if 0 < lr <= 0.5 * lr0 and lr0 < VANISHED * peak:
                    self.s.report(
                        "scheduler-cadence",
                        f"the learning rate of parameter group {i} of {oi.name} fell from {peak:.3g} to "
                        f"{lr0:.3g} and kept shrinking (to {lr:.3g}) over the last {oi.steps - steps0} optimizer "
                        "steps, with no learning-rate scheduler: a decay meant to be applied once (a layer-wise "
                        "factor) or once per epoch is applied at every step, so those parameters stop learning.",
                        fix="apply the factor once, when the parameter groups are built (or set group['lr'] = "
                        "base_lr * factor ** k from the epoch k instead of multiplying it in place every step).",
                        where=f"{oi.name} param_groups[{i}]['lr']", key=f"lr:{oi.name}",
                    )
                    break

    def epoch_boundary(self) -> None:
        if self.any_sched:
            self._idle_optimizers()
        self._vanishing_lrs()
        if not self.watched:
            return
        for entry in self.watched:
            sc, oi, sched0, opt0 = entry
            n_sched = sc.last_epoch - sched0
            n_opt = oi.steps - opt0
            entry[2], entry[3] = sc.last_epoch, oi.steps
            if n_opt < 4:
                continue
            name = type(sc).__name__
            if isinstance(sc, PER_BATCH) and n_sched <= n_opt // 2:
                self.s.report(
                    "scheduler-cadence",
                    f"{name} stepped {n_sched} time(s) during an epoch of {n_opt} optimizer steps: it is a "
                    "per-batch schedule (its horizon is counted in optimizer steps), so stepping it per "
                    "epoch leaves the learning rate stuck at the start of the cycle.",
                    fix="call "
                    "scheduler.step() right after optimizer.step() inside the batch loop.",
                    where=f"{name} on {oi.name}", key=name,
                )
            elif isinstance(sc, PER_EPOCH) and n_sched >= 4 and n_sched >= 0.9 * n_opt:
                h = horizon(sc)
                if h is not None and h <= n_sched:
                    self.s.report(
                        "scheduler-cadence",
                        f"{name} stepped {n_sched} times during one epoch ({n_opt} optimizer steps) and "
                        f"its horizon ({h} scheduler steps) was used up inside the epoch: an epoch-based "
                        "schedule is being stepped every batch, so the learning rate decays (or cycles) "
                        "far faster than configured.",
                        fix="call scheduler.step() once per epoch, after "
                        "the batch loop, or give the horizon in batches.",
                        where=f"{name} on {oi.name}", key=name,
                    )
