"""lr-lambda-returns-rate at run time (issue 33, round three's w79): a LambdaLR/MultiplicativeLR
function that returns the learning rate instead of a factor, so the rate is applied twice.
Planted bugs and their clean twins on digits, found as ``overt run`` finds schedulers (the
patched ``LRScheduler.step``, which their constructors call)."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F
from torch.optim import lr_scheduler as L

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, mlp, slugs

LR, MAX_ITER = 0.01, 1000


def poly_rate(it):
    return LR * (1 - it / MAX_ITER) ** 0.9  # the bug: a rate


def poly_factor(it):
    return (1 - it / MAX_ITER) ** 0.9


SCHEDULES = {
    "lambda": (lambda opt: L.LambdaLR(opt, lambda it: LR * (1 + 0.001 * it) ** -0.75),
               lambda opt: L.LambdaLR(opt, lambda it: (1 + 0.001 * it) ** -0.75)),
    "def": (lambda opt: L.LambdaLR(opt, lr_lambda=poly_rate),
            lambda opt: L.LambdaLR(opt, lr_lambda=poly_factor)),
    "multiplicative": (lambda opt: L.MultiplicativeLR(opt, lambda e: LR * 0.95 ** e),
                       lambda opt: L.MultiplicativeLR(opt, lambda e: 0.95)),
    # a warm-up whose first factor happens to equal the rate (1/100 with lr 0.01) rises: a factor
    "warmup": (None, lambda opt: L.LambdaLR(opt, lambda it: min(1.0, (it + 1) / 100))),
}


def _run(make_opt, make_sched, steps: int = 12):
    """A guarded SGD loop on digits with the optimizer and scheduler the callables build."""
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        opt = make_opt(model)
        sched = make_sched(opt)
        for xb, yb in batches(32, steps):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            sched.step()
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


def _train(form: str, bug: bool):
    return _run(lambda model: torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9),
                SCHEDULES[form][0 if bug else 1])


@pytest.mark.parametrize("form", ["lambda", "def", "multiplicative"])
def test_a_function_returning_the_rate_is_named_and_its_twin_is_silent(form):
    findings, text = _train(form, bug=True)
    # the multiplicative form collapses the rate to ~0 within steps: params-not-updating sees the symptom too
    expected = {"lr-lambda-returns-rate", "params-not-updating"} if form == "multiplicative" else {
        "lr-lambda-returns-rate"}
    assert slugs(findings)[0] == "lr-lambda-returns-rate" and set(slugs(findings)) <= expected, text
    assert "test_lr_lambda_returns_rate.py:3" in text and ("0.01 x 0.01 = 0.0001" in text or "0.01^n" in text)
    findings, text = _train(form, bug=False)
    assert findings == [], text


def test_a_warmup_starting_at_the_rate_is_silent():
    findings, text = _train("warmup", bug=False)
    assert findings == [], text


def test_groups_with_their_own_rates_and_a_function_returning_the_rate_are_silent():
    """The Transfer-Learning-Library's form: groups at 0.1 and 1.0 (get_parameters(base_lr=1.0)) and
    ``LambdaLR(opt, lambda x: args.lr * decay(x))``: the function's value is the rate on purpose,
    and with args.lr = 0.1 it equals the first group's rate by coincidence."""
    def groups(model):
        return torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.1},
                                {"params": model[2].parameters(), "lr": 1.0}], lr=0.1, momentum=0.9)

    findings, text = _run(groups, lambda opt: L.LambdaLR(opt, lambda x: 0.1 * (1 + 0.001 * x) ** -0.75), steps=6)
    assert "lr-lambda-returns-rate" not in slugs(findings), text
