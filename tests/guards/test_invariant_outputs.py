"""softmax-over-batch and BCEWithLogitsLoss given probabilities (issue 33 family 5): planted
bugs and their clean twins on digits."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import batches, digits, guarded, slugs


def _policy(dim: int):
    """REINFORCE-like: acts on one state at a time, learns on a batch of states."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10), nn.Softmax(dim=dim))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    x, y = digits()
    for episode in range(12):
        idx = torch.randint(1400, (16,))
        with torch.no_grad():
            actions = torch.stack([torch.multinomial(model(x[i]), 1)[0] for i in idx])
        reward = (actions == y[idx]).float()
        probs = model(x[idx]).gather(1, actions[:, None]).squeeze(1)
        loss = -(torch.log(probs + 1e-8) * (reward - reward.mean())).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_a_softmax_over_the_batch_is_named_and_dim_minus_one_is_silent():
    findings, text = _policy(0)
    assert "softmax-over-batch" in slugs(findings), text
    assert "Sequential.3 (Softmax, dim=0) normalises a (16, 10) input over dimension 0" in text
    findings, text = _policy(-1)
    assert findings == [], text


@pytest.mark.parametrize("sigmoid", [True, False])
def test_probabilities_into_bce_with_logits(sigmoid):
    torch.manual_seed(0)
    layers = [nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4)] + ([nn.Sigmoid()] if sigmoid else [])
    model = nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    loss_fn = nn.BCEWithLogitsLoss()
    for xb, yb in batches(32, 10):
        attrs = torch.stack([yb % 2 == 0, yb > 4, yb == 0, yb == 7], 1).float()
        opt.zero_grad()
        loss_fn(model(xb), attrs).backward()
        opt.step()
    findings = g.report()
    text = g.session.options.stream.getvalue()
    if sigmoid:
        assert slugs(findings) == ["softmax-before-cross-entropy"], text
        assert "BCEWithLogitsLoss" in text and "test_invariant_outputs.py:" in text
    else:
        assert findings == [], text


@pytest.mark.parametrize("ignore_index", [0, -100])
def test_an_ignore_index_that_is_a_class_is_named(ignore_index):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    loss_fn = nn.CrossEntropyLoss(ignore_index=ignore_index)  # 0: digit 0 is a class, never learned
    for xb, yb in batches(32, 8):
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert slugs(findings) == (["ignore-index-is-class"] if ignore_index == 0 else []), text
