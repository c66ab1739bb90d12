"""Guard on a per-step learning-rate schedule that is built and never stepped (slug ``scheduler-cadence``, its
slowest cadence; issue 33, round eighteen's w401).

Premise: a schedule whose horizon is counted in optimizer steps (``OneCycleLR``, ``CyclicLR``) is stepped once
per optimizer step; its constructor sets the rate to the cycle's starting value (``OneCycleLR``: ``max_lr /
div_factor``; ``CyclicLR``: ``base_lr``) and only its ``step()`` moves it from there.  A program that builds one and
never steps it -- a wrapper whose guard on the total steps is inverted, a ``step()`` on the wrong object, a call
left under a condition that never holds -- trains the whole run at a rate nobody chose (the peak over 25 for a
default one-cycle), with no error.

Seen when the run ends (``end_of_run``, nothing on any step): for every such scheduler the session saw built
(its constructor's first ``step()`` goes through the patched ``LRScheduler.step``), its ``last_epoch`` is compared
with the value it had when built.  Reported when it never moved while its optimizer stepped at least
:data:`MIN_STEPS` times since, no other scheduler of that optimizer stepped (a later stage of a ``SequentialLR``
not reached yet, a schedule replaced by another), every group still holds the rate the scheduler set (a rate
written by hand since drives the run instead: the scheduler is dead code) and no other ``scheduler-cadence``
finding named it.  Silent: a scheduler stepped
at any cadence (too slow a one is judged per epoch by :mod:`overt.guards.schedulers`), epoch-counted schedules
(a short run may end before their first step), ``ReduceLROnPlateau``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overt.guards.check import Check
from overt.guards.schedulers import PER_BATCH

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

MIN_STEPS = 20  # optimizer steps since the scheduler was built, with none of its own, before it is judged


def _start_rate(sc: Any) -> str:
    """What the rate stayed at, in the schedule's own terms."""
    rates = [g.get("lr") for g in getattr(sc.optimizer, "param_groups", ())]
    rate = f"{float(rates[0]):.3g}" if rates and isinstance(rates[0], (int, float)) else "its starting value"
    peaks = [g.get("max_lr") for g in getattr(sc.optimizer, "param_groups", ())]
    if peaks and isinstance(peaks[0], (int, float)) and peaks[0] > 0 and isinstance(rates[0], (int, float)):
        return f"{rate}, {float(rates[0]) / float(peaks[0]):.3g} of the peak max_lr={float(peaks[0]):.3g} it was given"
    return rate


def _rate_is_its_start(sc: Any) -> bool:
    """Whether every group still holds the rate the scheduler set when it was built (a rate written by hand since
    means something else drives it: the unstepped scheduler is dead code, not the run's schedule)."""
    last = getattr(sc, "_last_lr", None)
    groups = list(getattr(sc.optimizer, "param_groups", ()))
    if not isinstance(last, list) or len(last) != len(groups):
        return False
    for v, g in zip(last, groups):
        lr = g.get("lr")
        if not isinstance(v, (int, float)) or not isinstance(lr, (int, float)):
            return False  # a tensor rate: reading it could synchronise, nothing proven
        if abs(float(lr) - float(v)) > 1e-9 * max(abs(float(v)), 1e-30):
            return False
    return True


def _other_schedule_moved(scheds: Any, sc: Any, opt: Any) -> bool:
    """Whether another scheduler of the same optimizer stepped since it was found: the rate was driven (a later
    stage of a SequentialLR not reached yet, a schedule replaced by another), so this one's stillness proves
    nothing."""
    for entry in scheds.any_sched:
        other = entry[0]
        if other is sc or entry[1] is not opt or id(other) not in scheds.first:
            continue
        if getattr(other, "last_epoch", None) != scheds.first[id(other)][0]:
            return True
    return False


class ScheduleNeverStepped(Check):
    """Reads the schedulers :class:`~overt.guards.schedulers.SchedulerChecks` saw built, at the end of the run."""

    name = "schednever"

    def __init__(self, session: GuardSession):
        super().__init__(session)

    def end_of_run(self) -> None:
        scheds = self.s.scheds
        for entry in list(scheds.any_sched):
            sc, opt = entry[0], entry[1]
            if not isinstance(sc, PER_BATCH) or id(sc) not in scheds.first:
                continue
            last0, steps0 = scheds.first[id(sc)]
            oi = self.s.optimizers.get(id(opt))
            if oi is None or getattr(sc, "last_epoch", None) != last0 or oi.steps - steps0 < MIN_STEPS:
                continue
            name = type(sc).__name__
            if (self.s.reporter.has("scheduler-cadence", name) or _other_schedule_moved(scheds, sc, opt)
                    or not _rate_is_its_start(sc)):
                continue
            site = scheds.sites.get(id(sc), "")
            self.s.report(
                "scheduler-cadence",
                f"{name} was built and never stepped: {oi.name} stepped "
                f"{oi.steps - steps0} times after it, and the learning rate stayed for the whole run at the value "
                f"its constructor set, {_start_rate(sc)}. A {name} is a per-step schedule: only its step() moves the "
                "rate along the cycle, so the run trained at a rate nobody chose instead of the schedule configured "
                "(a wrapper's guard on the total steps written the wrong way round, step() called on another object "
                "or under a condition that never holds).",
                fix=f"call {name}.step() after every optimizer.step() (and stop only once last_epoch reaches "
                "total_steps: step while scheduler.last_epoch < total_steps).",
                where=site or f"{name} on {oi.name}", key=f"never:{id(sc)}",
            )


__all__ = ["ScheduleNeverStepped"]
