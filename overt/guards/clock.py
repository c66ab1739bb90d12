"""The sampling clock: which optimizer steps are *checked*.

Pure functions over a :class:`StepClock` (one per watched optimizer) and the
times the session measures: nothing here reads a clock or imports torch, so the
policy is tested on its own (tests/guards/test_clock.py).

The policy: steps ``0..warmup_steps-1`` are checked; after them one step in
``check_every``, stretched (up to :data:`MAX_STRETCH` x) so that the checks
cost at most ``budget`` (a fraction) of the training time.  The cost of a
checked step is its wall time minus that of a plain (unchecked) step.  At the
end of the warm-up a plain step's duration is not known yet, so the first
periodic check is placed after timing :data:`CALIBRATE` unchecked steps.
"""

from __future__ import annotations

import math
from typing import NamedTuple

CALIBRATE = 8  # unchecked steps timed after the warm-up, before the first periodic check
MAX_STRETCH = 20  # the budget may stretch the interval up to this many times check_every


class Calibration(NamedTuple):
    """The last warm-up step, kept until a few unchecked steps have been timed."""

    start: float  # its end (perf_counter seconds)
    steps: int  # optimizer steps done at its end
    checked: float  # its duration (seconds)


class StepClock:
    """One optimizer's place on the clock (the session's hooks read these fields on every step)."""

    __slots__ = ("steps", "armed", "next_check", "last_check_time", "last_check_step", "prev_post_time",
                 "calibrate")

    def __init__(self, next_check: int = 0) -> None:
        self.steps = 0  # optimizer steps done
        self.armed = True  # the next step is a checked one
        self.next_check = next_check  # index of the next checked step after the warm-up
        self.last_check_time: float | None = None  # end of the last checked step
        self.last_check_step = 0  # steps done at that time
        self.prev_post_time: float | None = None  # end of the last unchecked step
        self.calibrate: Calibration | None = None


def light_step(step: int, warmup_steps: int) -> bool:
    """A middle warm-up step: the checks that compare checked steps with each other (graphs
    kept alive, dead units on two checked steps in a row, parameters that never move) need
    only the first and the last two warm-up steps, so these skip them."""
    return 0 < step < warmup_steps - 2


def stretch(check_every: int, budget: float, plain: float, cost: float) -> int:
    """The check interval (in steps) for checks costing ``cost`` seconds on a loop whose plain
    step takes ``plain`` seconds, so that checks take about ``budget`` of the time."""
    return max(check_every, min(MAX_STRETCH * check_every, math.ceil(cost / (budget * plain))))


def after_checked_step(c: StepClock, *, now: float, check_cost: float, check_every: int, warmup_steps: int,
                       budget: float | None) -> tuple[int, Calibration | None]:
    """``(next_check, calibrate)`` after a checked step that ended at ``now`` (``c.steps``
    already counts it; ``check_cost``: seconds the checks measured themselves since the
    previous checked step).  ``budget`` None keeps exactly ``check_every``."""
    interval = check_every
    next_check, calibrate = c.next_check, c.calibrate
    between = c.steps - 1 - c.last_check_step  # unchecked steps since the previous check
    if budget and c.last_check_time is not None and between >= 2 and c.prev_post_time is not None:
        plain = max((c.prev_post_time - c.last_check_time) / between, 1e-7)
        cost = max(now - c.prev_post_time - plain, check_cost)
        interval = stretch(check_every, budget, plain, cost)
    elif budget and c.steps == warmup_steps and c.last_check_time is not None \
            and c.last_check_step == c.steps - 1 and interval > CALIBRATE + 1:
        # the last warm-up step: its duration is known, a plain step's is not yet; time a few
        # unchecked steps before placing the first periodic check
        calibrate = Calibration(now, c.steps, now - c.last_check_time)
        next_check = c.steps + CALIBRATE
    if c.steps > warmup_steps:
        next_check = c.steps - 1 + interval
    return next_check, calibrate


def calibrated_next_check(c: StepClock, *, now: float, check_every: int, budget: float | None) -> int | None:
    """The first periodic check, placed from the timed unchecked steps since ``c.calibrate``;
    None when they are too few (or there is no budget): the check stays where it is."""
    start, steps, checked = c.calibrate  # type: ignore[misc]
    if c.steps - steps < 2 or budget is None:
        return None
    plain = max((now - start) / (c.steps - steps), 1e-7)
    return steps - 1 + stretch(check_every, budget, plain, max(checked - plain, 0.0))
