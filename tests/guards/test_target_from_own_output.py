"""loss-compares-itself, widened (issue 33, branch rltargets): a regression whose target, built from the model's
own detached output, equals the prediction from the first checked call on.  The premise: a prediction can fit its
target by training, not before it."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs


class Critic(nn.Module):
    """A classifier with a value head that regresses the per-sample loss (an actor-critic's shape)."""

    def __init__(self):
        super().__init__()
        self.body = mlp(out=32)
        self.policy = nn.Linear(32, 10)
        self.value = nn.Linear(32, 1)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.policy(h), self.value(h).squeeze(1)


@pytest.mark.parametrize("bug", [True, False])
def test_value_targets_from_an_unwritten_buffer_are_named(bug):
    """The targets are advantages + values; the buggy loop reads the advantage buffer allocated as zeros, the twin
    the advantages it just computed (the same shape as the report of w236, on digits)."""
    torch.manual_seed(0)
    x, y = digits()
    model = Critic()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(60):  # the clock checks steps 0-4 and 50
        xb, yb = x[64 * (i % 20):64 * (i % 20 + 1)], y[64 * (i % 20):64 * (i % 20 + 1)]
        buffer = torch.zeros(len(xb))
        with torch.no_grad():
            logits, values = model(xb)
            advantages = -F.cross_entropy(logits, yb, reduction="none") - values
        returns = (buffer if bug else advantages) + values
        logits, v = model(xb)
        loss = F.cross_entropy(logits, yb) + 0.5 * F.mse_loss(v, returns)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-compares-itself"] if bug else []), text
    if bug:
        assert "model's own output" in text and "test_target_from_own_output.py" in text, text


def test_a_distillation_term_equal_at_the_first_step_is_left_alone():
    """Learning without forgetting: the old model is a copy, so the distillation term's sides are equal at the
    first step; the classification term moves the model and they differ from then on.  (The old model was trained
    first: a copy of the random initialisation read all along would be eval-model-stale's.)"""
    torch.manual_seed(0)
    x, y = digits()
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for i in range(20):
        opt.zero_grad()
        F.cross_entropy(model(x[64 * i:64 * (i + 1)]), y[64 * i:64 * (i + 1)]).backward()
        opt.step()
    old = copy.deepcopy(model)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(60):
        xb, yb = x[64 * (i % 20):64 * (i % 20 + 1)], y[64 * (i % 20):64 * (i % 20 + 1)]
        with torch.no_grad():
            ref = old(xb)
        out = model(xb)
        loss = F.cross_entropy(out, yb) + F.mse_loss(out, ref)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == [], text


def test_a_target_first_met_after_training_began_is_left_alone():
    """A second stage that starts regressing the model onto its own detached output after 20 steps: the site is
    first seen after training began, where an equal prediction may be a fit, so the widened premise stays silent."""
    torch.manual_seed(0)
    x, y = digits()
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING, check_every=5)
    for i in range(60):
        xb, yb = x[64 * (i % 20):64 * (i % 20 + 1)], y[64 * (i % 20):64 * (i % 20 + 1)]
        out = model(xb)
        loss = F.cross_entropy(out, yb)
        if i >= 20:
            with torch.no_grad():
                fitted = model(xb)
            loss = loss + F.mse_loss(out, fitted)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == [], text
