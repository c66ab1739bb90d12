"""torch's own optimizer step runs with the axes window's mode aside; a step that can run the user's code stays
under it, and a step that raises does not leave the mode off (overt/guards/optaside.py; issue 33, the ninth
overhead pass).  Real training loops on the digits data, the default checks."""

from __future__ import annotations

import io
import sys
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import _get_current_function_mode_stack

from overt.guards import aside, axes, optaside
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import _digits


class _Net(nn.Module):
    """The user's model: its forward notes whether it runs under the window's mode."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        self.under: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.under.append(any(isinstance(m, axes._IndexMode) for m in _get_current_function_mode_stack()))
        return self.body(x)


class _MyAdamW(torch.optim.AdamW):
    pass


def _train(make_opt: Any, calls: list[str], *, hook: Any = None, steps: int = 40) -> tuple[list[str], _Net]:
    """A hand-written loop under the default checks; the torch calls the axes window's mode saw, by the file and
    function that made them (counted through the mode's own method)."""
    orig = axes._IndexMode.__torch_function__

    def counted(self: Any, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        code = sys._getframe(1).f_code
        calls.append(f"{code.co_filename}:{code.co_name}")
        return orig(self, func, types, args, kwargs)

    axes._IndexMode.__torch_function__ = counted
    x, y = _digits()
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = _Net()
        opt = make_opt(model.parameters())
        if hook is not None:
            opt.register_step_pre_hook(hook)
        for i in range(steps):
            xb, yb = x[i * 32:(i + 1) * 32], y[i * 32:(i + 1) * 32]
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    finally:
        axes._IndexMode.__torch_function__ = orig
        findings = session.close()
    assert aside.WINDOW is None
    return sorted(f.slug for f in findings), model


def _optim(calls: list[str]) -> list[str]:
    """The calls made by torch's optimizer code other than ``zero_grad()`` (the user's own call, not the step's)."""
    return [f for f in calls if "/torch/optim/" in f.replace("\\", "/") and not f.endswith(":zero_grad")]


def test_torchs_own_step_is_not_seen_and_the_findings_are_the_same(monkeypatch):
    for make in (lambda p: torch.optim.AdamW(p, lr=1e-3), lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9)):
        calls: list[str] = []
        slugs, model = _train(make, calls)
        assert calls and not _optim(calls), _optim(calls)[:10]  # the model's calls are seen, the step's are not
        assert model.under[:3] == [True, True, True]  # the window is open on the first checked steps' forwards
        with monkeypatch.context() as m:  # the same loop with the mode under torch's step: the same findings
            m.setattr(optaside, "hold_through_step", lambda *a: None)
            seen: list[str] = []
            assert _train(make, seen)[0] == slugs
            assert _optim(seen)


def test_a_step_that_may_run_the_users_code_stays_under_the_mode():
    calls: list[str] = []
    _train(lambda p: _MyAdamW(p, lr=1e-3), calls)  # the user's subclass: its step may be the user's
    assert _optim(calls)
    under: list[bool] = []

    def users_hook(opt: Any, args: tuple, kwargs: dict) -> None:  # runs after the guards' (global) pre-hook
        under.append(any(isinstance(m, axes._IndexMode) for m in _get_current_function_mode_stack()))

    calls = []
    _train(lambda p: torch.optim.AdamW(p, lr=1e-3), calls, hook=users_hook)
    assert _optim(calls)
    assert under[:3] == [True, True, True]  # the user's hook runs under the mode on the window's steps


def test_a_step_that_raises_does_not_leave_the_mode_off():
    x, y = _digits()
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = _Net()
        opt = torch.optim.LBFGS(model.parameters())  # torch's own class; step() without its closure raises
        F.cross_entropy(model(x[:32]), y[:32]).backward()
        try:
            opt.step()
        except TypeError:
            pass
        else:
            raise AssertionError("LBFGS.step() without a closure was expected to raise")
        mode = aside.WINDOW
        assert mode is not None and mode.held  # held off since the pre-hook; the post-hook never ran
        model(x[32:64])  # the guards' next hook (the forward's) takes it over and puts it back
        assert model.under[-1] and not mode.held
        assert any(m is mode for m in _get_current_function_mode_stack())
    finally:
        session.close()
    assert aside.WINDOW is None and not _get_current_function_mode_stack()
