"""scheduler-optimizer-idle (overt/guards/schedulers.py, issue 33): a scheduler left on the
optimizer that was replaced when the backbone was unfrozen; the twin re-creates it.  Found as
``overt run`` finds them (PyTorch's global hooks), on a small real run on digits."""

from __future__ import annotations

import io

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, mlp, slugs


def _unfreeze_after_one_epoch(recreate_scheduler: bool) -> list:
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        for p in model[0].parameters():
            p.requires_grad_(False)  # the first epoch trains the head only
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        for epoch in range(4):
            if epoch == 1:  # unfreeze: a new optimizer over every parameter
                for p in model.parameters():
                    p.requires_grad_(True)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                if recreate_scheduler:
                    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
            sched.step()
    finally:
        findings = session.close()
    return findings


def test_a_scheduler_left_on_a_replaced_optimizer_is_named():
    findings = _unfreeze_after_one_epoch(recreate_scheduler=False)
    assert slugs(findings) == ["scheduler-optimizer-idle"]
    assert "StepLR" in findings[0].message and "SGD#0" in findings[0].message


def test_a_scheduler_made_again_with_the_optimizer_is_quiet():
    assert _unfreeze_after_one_epoch(recreate_scheduler=True) == []


def test_a_scheduler_on_a_wrapper_that_shares_the_groups_is_quiet():
    """accelerate's AcceleratedOptimizer (what the Hugging Face Trainer steps) wraps the optimizer
    and shares its param_groups: a scheduler made on the wrapper sets the learning rate the inner
    optimizer trains with, though only the inner one's step() runs (TRL's SFT script, issue 33)."""
    from accelerate import Accelerator

    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        model, opt = Accelerator(cpu=True).prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-2))
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / 100)
        for epoch in range(3):
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                schedule.step()
    finally:
        findings = session.close()
    assert opt.optimizer.param_groups[0]["lr"] < 1e-2  # the schedule reached the optimizer that steps
    assert findings == []


def _two_fits(second_fit_new_scheduler: bool) -> list:
    """A library's fit() called twice (pytorch-tabnet's refits, session 51): each fit builds a new optimizer
    and, in the correct program, a new scheduler, stepped at every epoch's end -- after the last epoch too,
    so the first fit's scheduler has stepped once more than its optimizer when the second fit starts.  The
    validation pass before each scheduler step starts a DataLoader pass after the optimizer's last step."""
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[640:896], y[640:896]), batch_size=128)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model, sched = mlp(), None
        for fit in range(2):
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)
            if sched is None or second_fit_new_scheduler:
                sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
            for epoch in range(3):
                for xb, yb in loader:
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(xb), yb).backward()
                    opt.step()
                with torch.no_grad():
                    sum(nn.functional.cross_entropy(model(xb), yb) for xb, yb in val)
                sched.step()
    finally:
        findings = session.close()
    return findings


def test_each_fit_with_its_own_optimizer_and_scheduler_is_quiet():
    """The first fit's scheduler stepped after its optimizer's last step, then never again: it did not step
    while the second fit's optimizer trained, so nothing is left on a replaced optimizer."""
    assert _two_fits(second_fit_new_scheduler=True) == []


def test_a_second_fit_that_keeps_the_first_scheduler_is_still_named():
    findings = _two_fits(second_fit_new_scheduler=False)
    assert slugs(findings) == ["scheduler-optimizer-idle"]
    assert "Adam#0" in findings[0].message
