"""lr-schedule-skips-groups (overt/guards/lrgroups.py, issue 33): a learning-rate schedule written by
hand that moves only some parameter groups (rasbt/LLMs-from-scratch#692: the assignment left after
the loop over param_groups).  Small real runs on digits with a weight-decay / no-decay split."""

from __future__ import annotations

import io
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, mlp, slugs


def _train(set_rate, epochs: int = 1) -> list:
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
        total, step = epochs * len(loader), 0
        for _ in range(epochs):
            for xb, yb in loader:
                lr = 3e-3 * min(1.0, (step + 1) / 10) * 0.5 * (1 + math.cos(math.pi * step / total))
                set_rate(opt, lr)
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                step += 1
    finally:
        findings = session.close()
    return findings


def _after_the_loop(opt, lr):
    for param_group in opt.param_groups:
        pass
    param_group["lr"] = lr  # noqa: B023  the bug: only the last group


def _first_group(opt, lr):
    opt.param_groups[0]["lr"] = lr


def _every_group(opt, lr):
    for g in opt.param_groups:
        g["lr"] = lr


def test_a_rate_set_after_the_loop_is_named():
    findings = _train(_after_the_loop)
    assert slugs(findings) == ["lr-schedule-skips-groups"]
    assert "param group 1" in findings[0].message and "group(s) 0" in findings[0].message


def test_a_rate_set_on_group_zero_is_named():
    findings = _train(_first_group)
    assert slugs(findings) == ["lr-schedule-skips-groups"]
    assert "group(s) 1" in findings[0].message


def test_a_rate_set_in_every_group_is_quiet():
    assert _train(_every_group) == []


def test_a_group_frozen_at_rate_zero_is_quiet():
    def freeze_then_schedule(opt, lr):
        opt.param_groups[0]["lr"] = 0.0  # the backbone frozen by its rate
        opt.param_groups[1]["lr"] = lr

    assert _train(freeze_then_schedule) == []
