"""The sampling clock (overt/guards/clock.py): pure functions, tested without torch."""

from __future__ import annotations

import subprocess
import sys

from overt.guards import clock
from overt.guards.clock import CALIBRATE, MAX_STRETCH, Calibration, StepClock


def _clock(**fields) -> StepClock:
    c = StepClock(next_check=50)
    for k, v in fields.items():
        setattr(c, k, v)
    return c


def test_importing_the_clock_imports_no_torch():
    code = "import sys, overt.guards.clock; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_light_steps_are_the_middle_of_the_warmup():
    assert [s for s in range(8) if clock.light_step(s, 5)] == [1, 2]
    assert [s for s in range(8) if clock.light_step(s, 3)] == []


def test_stretch_keeps_checks_within_the_budget():
    assert clock.stretch(50, 0.005, plain=1e-3, cost=1e-5) == 50  # cheap checks: check_every
    assert clock.stretch(50, 0.005, plain=1e-3, cost=1e-3) == 200  # 1 ms per 200 ms of training
    assert clock.stretch(50, 0.005, plain=1e-3, cost=1.0) == MAX_STRETCH * 50  # capped


def test_warmup_steps_keep_the_first_periodic_check_at_check_every():
    c = _clock(steps=2, last_check_time=1.0, last_check_step=1)
    assert clock.after_checked_step(c, now=1.1, check_cost=0.05, check_every=50, warmup_steps=5,
                                    budget=0.005) == (50, None)


def test_the_last_warmup_step_starts_calibration():
    c = _clock(steps=5, last_check_time=1.0, last_check_step=4)
    next_check, cal = clock.after_checked_step(c, now=1.3, check_cost=0.0, check_every=50, warmup_steps=5,
                                               budget=0.005)
    assert next_check == 5 + CALIBRATE
    assert cal.steps == 5 and abs(cal.checked - 0.3) < 1e-9
    # no budget: exactly check_every, nothing to calibrate
    assert clock.after_checked_step(c, now=1.3, check_cost=0.0, check_every=50, warmup_steps=5,
                                    budget=None) == (50, None)


def test_calibration_places_the_first_periodic_check():
    cal = Calibration(start=10.0, steps=5, checked=0.101)  # a checked step 100 ms over a plain one
    c = _clock(steps=13, calibrate=cal)
    # 8 plain steps of 1 ms: checks cost 0.1 s per check -> every 20000 steps wanted, capped at 20x
    assert clock.calibrated_next_check(c, now=10.008, check_every=50, budget=0.005) == 5 - 1 + 1000
    cheap = _clock(steps=13, calibrate=Calibration(10.0, 5, 0.001))
    assert clock.calibrated_next_check(cheap, now=10.008, check_every=50, budget=0.005) == 5 - 1 + 50
    assert clock.calibrated_next_check(_clock(steps=6, calibrate=cal), now=10.001, check_every=50,
                                       budget=0.005) is None  # too few steps timed
    assert clock.calibrated_next_check(c, now=10.008, check_every=50, budget=None) is None


def test_periodic_checks_are_stretched_by_their_measured_cost():
    # previous check ended at t=0 after step 100; 49 plain steps of 2 ms; this checked step took 12 ms
    c = _clock(steps=150, last_check_time=0.0, last_check_step=100, prev_post_time=0.098)
    next_check, cal = clock.after_checked_step(c, now=0.110, check_cost=0.0, check_every=50, warmup_steps=5,
                                               budget=0.005)
    assert cal is None
    assert next_check == 150 - 1 + 1000  # 10 ms of checks per 2 ms step at 0.5%: capped at 20x
    cheap = clock.after_checked_step(c, now=0.1000001, check_cost=0.0, check_every=50, warmup_steps=5,
                                     budget=0.005)
    assert cheap == (150 - 1 + 50, None)
    # no budget (e.g. every rank of a DDP run must check at the same steps): exactly check_every
    assert clock.after_checked_step(c, now=0.110, check_cost=0.0, check_every=50, warmup_steps=5,
                                    budget=None) == (150 - 1 + 50, None)
