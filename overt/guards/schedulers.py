"""Guard on the learning-rate scheduler's cadence (slug ``scheduler-cadence``).

Schedulers are given explicitly or found when they step (through the
patched ``LRScheduler.step``).  At each
DataLoader epoch boundary the guard compares how many times each scheduler
and its optimizer stepped during the epoch with the scheduler's horizon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.optim import lr_scheduler as L

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

PER_BATCH = tuple(c for c in (getattr(L, "OneCycleLR", None), getattr(L, "CyclicLR", None)) if c)
PER_EPOCH = tuple(c for c in (L.StepLR, L.MultiStepLR, L.ExponentialLR, L.CosineAnnealingLR) if c)


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

    def add(self, scheduler: Any) -> None:
        """Watch ``scheduler`` (given explicitly, or seen stepping through the patched ``LRScheduler.step``)."""
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

    def epoch_boundary(self) -> None:
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
