"""The sampling clock (overt/guards/clock.py): pure functions of the step count, tested
without torch; and the session follows them whatever the machine's load."""

from __future__ import annotations

import subprocess
import sys

import pytest

from overt.guards import clock
from overt.guards.clock import DENSE, MAX_STRETCH


def test_importing_the_clock_imports_no_torch():
    code = "import sys, overt.guards.clock; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_clock_reads_no_time():
    source = open(clock.__file__).read()
    assert "import time" not in source and "perf_counter" not in source and "monotonic" not in source


def test_light_steps_are_the_middle_of_the_warmup():
    assert [s for s in range(8) if clock.light_step(s, 5)] == [1, 2]
    assert [s for s in range(8) if clock.light_step(s, 3)] == []


def test_warmup_then_every_check_every_steps():
    assert clock.checked_steps(260, check_every=50, warmup_steps=5) == [0, 1, 2, 3, 4, 50, 100, 150, 200, 250]
    assert clock.checked_steps(12, check_every=2, warmup_steps=3) == [0, 1, 2, 3, 5, 7, 9, 11]
    assert clock.checked_steps(6, check_every=1, warmup_steps=3) == [0, 1, 2, 3, 4, 5]


def test_long_runs_are_checked_more_sparsely_but_always():
    steps = clock.checked_steps(100_000, check_every=50, warmup_steps=5)
    gaps = [b - a for a, b in zip(steps[5:], steps[6:])]
    assert gaps == sorted(gaps)  # the interval never shrinks
    assert gaps[0] == 50 and max(gaps) == MAX_STRETCH * 50
    assert all(g == 50 for a, g in zip(steps[5:], gaps) if a < DENSE * 50)
    assert steps[-1] > 100_000 - MAX_STRETCH * 50  # still checked at the end
    assert len(steps) < 300  # 100k steps: a few hundred checks


@pytest.mark.parametrize("check_every,warmup", [(50, 5), (50, 3), (7, 5), (1, 1)])
def test_the_session_checks_exactly_the_scheduled_steps(check_every, warmup):
    import torch

    from overt.guards.options import GuardOptions
    from overt.guards.session import GuardSession

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    session = GuardSession(GuardOptions(check_every=check_every, warmup_steps=warmup))
    session.watch_model(model)
    oi = session.watch_optimizer(opt)
    seen = []
    try:
        for index in range(400):
            if oi.armed:
                seen.append(index)
            model(torch.ones(2, 3)).sum().backward()
            opt.step()
            opt.zero_grad()
    finally:
        session.close()
    assert seen == clock.checked_steps(400, check_every=check_every, warmup_steps=warmup)
