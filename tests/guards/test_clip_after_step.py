"""clip-after-step at run time (issue 33, round three's w83): gradients clipped after the optimizer
step that already applied them.  Planted bugs and their clean twins on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import batches, guarded, slugs


def _train(order: str, set_to_none: bool = True):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for xb, yb in batches(32, 12):
        opt.zero_grad(set_to_none=set_to_none)
        F.cross_entropy(model(xb), yb).backward()
        if order == "before":
            nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()
        if order == "after":
            nn.utils.clip_grad_value_(model.parameters(), 0.1)
        elif order == "measure":
            nn.utils.clip_grad_norm_(model.parameters(), float("inf"))  # the norm, logged: clips nothing
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("set_to_none", [True, False])
def test_a_value_clip_after_the_step_is_named_and_its_twin_is_silent(set_to_none):
    findings, text = _train("after", set_to_none)
    assert slugs(findings) == ["clip-after-step"], text
    assert "clip_grad_value_ at " in text and "test_clip_after_step.py:27" in text
    assert "Adam#0.step() already applied" in text
    findings, text = _train("before", set_to_none)
    assert findings == [], text


def test_an_infinite_norm_read_after_the_step_is_silent():
    findings, text = _train("measure")
    assert findings == [], text
