"""schedule-past-horizon (overt/guards/horizon.py) and class-weight-zero (overt/guards/classweights.py),
issue 33 round twelve: a schedule and a class weighting consistent with the run and the data.  Each
planted bug beside its clean twin on a small real run on digits, found as ``overt run`` finds them."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.classweights import zeroed
from overt.guards.horizon import overrun
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs

# -- schedule-past-horizon ----------------------------------------------------------------------


def _cosine_run(t_max: int, steps: int = 80, kind: str = "cosine") -> tuple[list, str]:
    torch.manual_seed(0)
    x, y = digits()
    stream = io.StringIO()
    session = GuardSession(GuardOptions(stream=stream, ignore=TIMING), auto=True)
    try:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if kind == "cosine":
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=t_max)
        elif kind == "restarts":
            sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=t_max)
        else:  # a warm-up, then the cosine over the remaining steps
            warm = 10
            sched = torch.optim.lr_scheduler.SequentialLR(opt, [
                torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warm),
                torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=t_max - warm)], milestones=[warm])
        for i in range(steps):
            b = torch.randint(0, len(x), (32,))
            opt.zero_grad()
            F.cross_entropy(model(x[b]), y[b]).backward()
            opt.step()
            sched.step()
    finally:
        findings = session.close()
    return findings, stream.getvalue()


def test_a_cosine_stepped_past_its_horizon_is_named():
    findings, text = _cosine_run(t_max=80 - 30)  # T_max = total - warm-up, with no warm-up ever run
    assert slugs(findings) == ["schedule-past-horizon"], text
    assert "T_max=50" in text and "stepped 80 times" in text and "test_schedule_and_weights.py:" in text


@pytest.mark.parametrize("t_max,kind", [(80, "cosine"), (200, "cosine"), (70, "cosine"), (20, "restarts"),
                                        (80, "sequential")])
def test_a_cosine_within_its_horizon_or_restarting_on_purpose_is_silent(t_max, kind):
    findings, text = _cosine_run(t_max=t_max, kind=kind)
    assert slugs(findings) == [], text


def _cosine_lambda(total: int, warm: int = 5):
    def f(k: int) -> float:
        if k < warm:
            return k / warm
        return max(0.0, 0.5 * (1 + math.cos(math.pi * (k - warm) / (total - warm))))
    return f


def _lambda_run(fns, steps: int = 80, poly: int = 0) -> tuple[list, str]:
    torch.manual_seed(0)
    x, y = digits()
    stream = io.StringIO()
    session = GuardSession(GuardOptions(stream=stream, ignore=TIMING), auto=True)
    try:
        model = mlp()
        opt = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters()}], lr=0.1)
        if poly:
            sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=poly, power=1.0)
        else:
            sched = torch.optim.lr_scheduler.LambdaLR(opt, fns)
        for i in range(steps):
            b = torch.randint(0, len(x), (32,))
            opt.zero_grad()
            F.cross_entropy(model(x[b]), y[b]).backward()
            opt.step()
            sched.step()
    finally:
        findings = session.close()
    return findings, stream.getvalue()


def _linear(total: int):
    return lambda k: max(0.0, (total - k) / total)


@pytest.mark.parametrize("fn,word", [(_cosine_lambda(40), "climbs back"), (_linear(40), "stays there")])
def test_a_lambda_schedule_read_past_its_horizon_is_named(fn, word):
    """num_training_steps counted in optimizer steps while the scheduler steps every micro-batch."""
    findings, text = _lambda_run([fn, fn])
    assert slugs(findings) == ["schedule-past-horizon"], text
    assert word in text and "LambdaLR" in text


def test_a_polynomial_decay_held_at_zero_is_named():
    findings, text = _lambda_run(None, poly=40)
    assert slugs(findings) == ["schedule-past-horizon"], text


@pytest.mark.parametrize("fns", [
    [_cosine_lambda(80)] * 2,  # the horizon is the run
    [_linear(80)] * 2,
    [lambda k: min(1.0, k / 10)] * 2,  # a warm-up, then constant
    [lambda k: 0.5 * (1 + math.cos(math.pi * (k % 30) / 30))] * 2,  # restarts on purpose
    [_linear(80), _linear(40)],  # one group frozen part-way, the other trains to the end
    [lambda k: 0.1 + abs((k % 40) - 20) / 20] * 2,  # a cyclic (triangular) schedule
])
def test_lambda_schedules_that_end_annealed_or_cycle_on_purpose_are_silent(fns):
    findings, text = _lambda_run(fns)
    assert slugs(findings) == [], text


def test_a_polynomial_decay_within_the_run_is_silent():
    findings, text = _lambda_run(None, poly=80)
    assert slugs(findings) == [], text


def test_the_overrun_margin():
    assert overrun(125, 100) and not overrun(124, 100) and not overrun(101, 100) and not overrun(9, 3)


# -- class-weight-zero --------------------------------------------------------------------------


def _imbalanced_digits(formula: str, steps: int = 10) -> tuple[list, str]:
    """Digits 0-2 kept whole, the others one in three; class weights from the training counts."""
    torch.manual_seed(0)
    x, y = digits()
    keep = (y < 3) | (torch.rand(len(y)) < 0.33)
    x, y = x[keep], y[keep]
    counts = torch.bincount(y, minlength=10).float()
    weights = {
        "log": torch.log(counts.max() / counts),  # 0 for the most frequent class
        "log1": 1 + torch.log(counts.max() / counts),
        "inverse": counts.sum() / (10 * counts),
        "padding": torch.tensor([0.0] + [1.0] * 9),  # class 0 set aside on purpose among equal weights
    }[formula]
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(steps):
        b = torch.randint(0, len(x), (64,))
        opt.zero_grad()
        F.cross_entropy(model(x[b]), y[b], weight=weights).backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_a_balancing_weight_of_zero_for_the_majority_class_is_named():
    findings, text = _imbalanced_digits("log")
    assert slugs(findings) == ["class-weight-zero"], text
    assert "weighs" in text and "ignore_index" in text and "test_schedule_and_weights.py:" in text


@pytest.mark.parametrize("formula", ["log1", "inverse", "padding"])
def test_positive_balancing_weights_or_a_padding_class_are_silent(formula):
    findings, text = _imbalanced_digits(formula)
    assert findings == [], text


def test_zeroed_premise():
    counts = [100.0, 90.0, 30.0, 20.0]
    assert zeroed(counts, [0.0, 0.1, 1.2, 1.6]) == [0]
    assert zeroed(counts, [0.0, 1.0, 1.0, 1.0]) == []  # equal weights beside it: set aside on purpose
    assert zeroed([1000.0, 90.0, 30.0, 20.0], [0.0, 0.1, 1.2, 1.6]) == []  # a dominant class (background)
    assert zeroed(counts, [0.5, 0.1, 0.0, 1.6]) == []  # not the most frequent class
    assert zeroed([70.0, 30.0], [0.0, 0.8]) == [0]
