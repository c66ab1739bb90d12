"""eval-drops-samples (issue 33, data pipelines: evaluation on a subset by accident): an evaluation
DataLoader built with drop_last=True.  Planted bugs (a hand-written loop, the engine's own evaluation)
and clean twins on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs


def _run(val_kwargs):
    x, y = digits()
    train = DataLoader(TensorDataset(x[:1000], y[:1000]), batch_size=64, shuffle=True, drop_last=True)
    val = DataLoader(TensorDataset(x[1000:1797], y[1000:1797]), **val_kwargs)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(2):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            hits = sum(int((model(xb).argmax(1) == yb).sum()) for xb, yb in val)
    return hits, g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("drop", [True, False])
def test_evaluation_loader_with_drop_last(drop):
    hits, findings, text = _run({"batch_size": 128, "drop_last": drop})
    if drop:
        assert slugs(findings) == ["eval-drops-samples"], text
        assert "29 of its 797 samples (4%)" in text
        assert "test_eval_drops_samples.py:" in text  # the loop that iterates the loader
    else:
        assert findings == [], text


def test_batch_size_that_divides_the_set_drops_nothing():
    hits, findings, text = _run({"batch_size": 797, "drop_last": True})
    assert findings == [], text


def test_training_loader_with_drop_last_is_a_choice():
    """The training loader above drops 1000 % 64 = 40 samples per epoch: not judged."""
    hits, findings, text = _run({"batch_size": 100})
    assert "eval-drops-samples" not in slugs(findings), text
