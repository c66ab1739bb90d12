"""LBFGS closures (issue 33, optimizers and their state): a closure without zero_grad() accumulates the
gradients of every evaluation of the line search (``stale-gradients``); a correct full-batch fit that
converges makes LBFGS return without moving (its gradient is below ``tolerance_grad``), which is not
``params-not-updating``.  Real full-batch fits on digits, as ``overt run`` finds them."""

from __future__ import annotations

import io

import torch
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, slugs


def _fit(zero_grad: bool, lr: float = 1.0, steps: int = 6) -> list:
    x, y = digits()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, stop_on_error=False), auto=True)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
        opt = torch.optim.LBFGS(model.parameters(), lr=lr, max_iter=20)

        def closure():
            if zero_grad:
                opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[:256]), y[:256])
            loss.backward()
            return loss

        for _ in range(steps):
            opt.step(closure)
    finally:
        findings = session.close()
    return findings


def test_a_converged_fit_is_quiet():
    assert _fit(zero_grad=True) == []


def test_a_closure_without_zero_grad_is_named():
    assert "stale-gradients" in slugs(_fit(zero_grad=False))


def test_an_lbfgs_that_never_moves_is_still_named():
    assert slugs(_fit(zero_grad=True, lr=0.0, steps=6)) == ["params-not-updating"]
