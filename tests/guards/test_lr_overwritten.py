"""lr-overwritten-by-scheduler (overt/guards/lroverride.py, issue 33): a learning rate written into the
param groups by hand is replaced at the scheduler's next step when the scheduler computes its rate
from its own base rates (AnswerDotAI/ModernBERT#124: a new rate on resume under a LambdaLR).  Small
real runs on digits, as ``overt run`` finds them (PyTorch's global hooks)."""

from __future__ import annotations

import io

import torch
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, mlp, slugs


def _run(build, write=None, every_step=None, steps: int = 40) -> list:
    """``build(opt)`` makes the scheduler(s); ``write(opt, i)`` runs before step ``i``."""
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scheds = build(opt)
        for i, (xb, yb) in enumerate(batches(64, n=steps)):
            if write is not None:
                write(opt, i)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            for sc in scheds:
                if isinstance(sc, torch.optim.lr_scheduler.ReduceLROnPlateau):
                    if i % 10 == 9:
                        sc.step(1.0)  # a flat metric: the plateau cuts the rate
                else:
                    sc.step()
    finally:
        findings = session.close()
    return findings


def _warmup(opt):
    return [torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))]


def _resume_rate(opt, i):
    if i == 0:  # resumed: a new learning rate, set after the scheduler was built
        for g in opt.param_groups:
            g["lr"] = 3e-3


def test_a_rate_written_after_the_scheduler_is_named():
    findings = _run(_warmup, _resume_rate)
    assert slugs(findings) == ["lr-overwritten-by-scheduler"]
    assert "set to 0.003 by hand" in findings[0].message and "LambdaLR" in findings[0].message
    assert "test_lr_overwritten.py" in findings[0].where


def test_a_manual_decay_under_one_cycle_is_named():
    def one_cycle(opt):
        return [torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=60)]

    def decay(opt, i):
        if i == 20:  # a step decay written by hand
            for g in opt.param_groups:
                g["lr"] *= 0.1

    findings = _run(one_cycle, decay)
    assert slugs(findings) == ["lr-overwritten-by-scheduler"]
    assert "OneCycleLR" in findings[0].message


def test_a_rate_set_before_the_scheduler_is_quiet():
    def built_after(opt):
        _resume_rate(opt, 0)
        return _warmup(opt)

    assert _run(built_after) == []


def test_a_rate_written_before_every_step_is_quiet():
    """A loop that sets the rate itself at every step: the scheduler never wins, nothing is lost."""
    assert _run(_warmup, lambda opt, i: opt.param_groups[0].__setitem__("lr", 1e-3 * min(1.0, (i + 1) / 5))) == []


def test_a_second_scheduler_on_the_optimizer_is_quiet():
    def warmup_and_plateau(opt):
        return _warmup(opt) + [torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)]

    assert _run(warmup_and_plateau) == []


def test_a_chainable_scheduler_keeps_the_written_rate():
    def step_lr(opt):
        return [torch.optim.lr_scheduler.StepLR(opt, step_size=15, gamma=0.5)]

    assert _run(step_lr, _resume_rate) == []
