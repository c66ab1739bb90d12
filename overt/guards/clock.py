"""The sampling clock: which optimizer steps are *checked*.

Which steps are checked is a function of the step count alone, never of measured times, so
one program gives the same findings on a busy machine and on a quiet one (and every rank of a
distributed run checks the same steps).  Nothing here reads a clock or imports torch, so the
policy is tested on its own (tests/guards/test_clock.py).

The schedule: step indices ``0..warmup_steps-1`` are checked; then ``check_every``,
``2*check_every``, ... until :data:`DENSE` x ``check_every`` steps have run; after that the
interval grows with the run (step // (DENSE*check_every) times ``check_every``, up to
:data:`MAX_STRETCH` x), so a long run is checked ever more sparsely but never stops being
checked.  What a checked step costs was measured once, by benchmark
(``benchmarks/engine_overhead.py --guards``, docs/guards.md#how-it-stays-cheap), not timed at
run time.
"""

from __future__ import annotations

DENSE = 40  # every check_every-th step is checked up to DENSE * check_every steps
MAX_STRETCH = 20  # the interval grows up to this many times check_every


class StepClock:
    """One optimizer's place on the clock (the session's hooks read these fields on every step)."""

    __slots__ = ("steps", "armed", "next_check")

    def __init__(self, next_check: int = 0) -> None:
        self.steps = 0  # optimizer steps done
        self.armed = True  # the next step is a checked one
        self.next_check = next_check  # index of the next checked step after the warm-up


def light_step(step: int, warmup_steps: int) -> bool:
    """A middle warm-up step: the checks that compare checked steps with each other (graphs
    kept alive, dead units on two checked steps in a row, parameters that never move) need
    only the first and the last two warm-up steps, so these skip them."""
    return 0 < step < warmup_steps - 2


def interval(index: int, check_every: int) -> int:
    """Steps from the checked step ``index`` (after the warm-up) to the next checked one."""
    return check_every * max(1, min(MAX_STRETCH, index // (DENSE * check_every)))


def after_checked_step(c: StepClock, *, check_every: int, warmup_steps: int) -> int:
    """The index of the next checked step after the warm-up, once a checked step is done
    (``c.steps`` already counts it).  During the warm-up it stays where it is."""
    if c.steps > warmup_steps:
        index = c.steps - 1  # the step just checked
        return index + interval(index, check_every)
    return c.next_check


def is_armed(c: StepClock, warmup_steps: int) -> bool:
    """Whether the step after ``c.steps`` done steps is a checked one."""
    return c.steps < warmup_steps or c.steps >= c.next_check


def checked_steps(total: int, *, check_every: int, warmup_steps: int) -> list[int]:
    """The indices of the checked steps among the first ``total`` (what the session does,
    replayed: for tests and docs)."""
    c = StepClock(next_check=check_every)
    out = []
    armed = True
    for index in range(total):
        if armed:
            out.append(index)
        c.steps = index + 1
        if armed:
            c.next_check = after_checked_step(c, check_every=check_every, warmup_steps=warmup_steps)
        armed = is_armed(c, warmup_steps)
    return out
