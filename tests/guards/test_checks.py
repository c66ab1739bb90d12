"""The check interface: a new check is one class the session calls; a check that raises
never breaks training and is reported once, by name."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F

from overt.guards.check import Check
from overt.guards.options import GuardOptions
from overt.guards.patches import ACTIVE
from overt.guards.registry import CHECKS
from overt.guards.session import GuardSession

from .helpers import batches, mlp, slugs


def _session(*extra: type[Check], **options) -> GuardSession:
    return GuardSession(GuardOptions(stream=io.StringIO(), **options), checks=(*CHECKS, *extra))


def _loop(session: GuardSession, steps: int, zero_grad: bool = True) -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    session.watch_model(model)
    session.watch_optimizer(opt)
    for xb, yb in batches(32, steps):
        if zero_grad:
            opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()


class StepProbe(Check):
    """Counts what the session tells a check."""

    name = "probe"

    def __init__(self, session):
        super().__init__(session)
        self.before: list[int] = []
        self.after: list[int] = []
        self.ends = 0

    def before_checked_step(self, oi, closure):
        self.before.append(oi.steps)
        self.s.defer(torch.ones(()), lambda vals: None)

    def after_checked_step(self, oi):
        self.after.append(oi.steps)

    def end_of_run(self):
        self.ends += 1


def test_a_registered_check_is_called_at_checked_steps_only():
    s = _session(StepProbe, check_every=10, warmup_steps=2)
    _loop(s, 31)
    assert s.close() == []
    assert s.probe.before == [0, 1, 10, 20, 30]  # steps done before each checked step
    assert s.probe.after == [1, 2, 11, 21, 31]
    assert s.probe.ends == 1


class Broken(Check):
    """Raises from every kind of place a check runs in."""

    name = "broken"

    def on_checked_forward(self, info, args, light):
        raise RuntimeError("forward hook bug")

    def before_checked_step(self, oi, closure):
        self.s.defer(torch.zeros(()), self._callback)
        raise ValueError("step hook bug")

    def _callback(self, vals):
        raise KeyError("callback bug")


def test_a_check_that_raises_never_breaks_training_and_is_reported_once_by_name():
    s = _session(Broken, check_every=5, warmup_steps=2, stop_on_error=False)
    _loop(s, 12, zero_grad=False)  # and a planted bug the other checks must still find
    findings = s.close()
    assert "stale-gradients" in slugs(findings)
    text = s.options.stream.getvalue()
    assert text.count("internal error in check Broken") == 1, text
    assert "RuntimeError: forward hook bug" in text  # the first failure is the one shown


def test_a_failing_loss_check_is_reported_and_the_loss_still_runs():
    s = _session()

    def fail(*_):
        raise RuntimeError("loss check bug")

    s.losses.before = fail.__get__(s.losses)  # a bound method of the check, as the wrappers call
    _loop(s, 3)
    assert s.close() == []
    text = s.options.stream.getvalue()
    assert text.count("internal error in check LossChecks (RuntimeError: loss check bug)") == 1, text


def test_a_check_name_cannot_shadow_the_session():
    class Clash(Check):
        name = "step"

    with pytest.raises(ValueError, match="'step' is taken"):
        _session(Clash)
    assert not ACTIVE  # nothing was left installed
