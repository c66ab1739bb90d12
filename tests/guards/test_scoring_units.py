"""predictions-not-denormalised at run time (overt/guards/predshape.py, issue 33 w64): a regression model
trained on normalised targets whose evaluation outputs are subtracted from targets in their own units is
named at the line of the error; predictions put back in the targets' units, a model trained on raw targets
and scoring against the normalised targets stay quiet.  A real run on scikit-learn's diabetes data."""

from __future__ import annotations

import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs


def _run(normalise: bool, score) -> tuple[list, str, float]:
    from sklearn.datasets import load_diabetes

    d = load_diabetes()
    x = torch.tensor(d.data, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.float32)
    x = (x - x[:350].mean(0)) / x[:350].std(0)
    std, mean = torch.std_mean(y[:350])
    target = (y - mean) / std if normalise else y
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(30):
        for i in range(0, 350, 32):
            opt.zero_grad()
            loss_fn(model(x[i:i + 32]).squeeze(1), target[i:i + 32]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(x[350:]).squeeze(1)
        mae = float(score(pred, y[350:], target[350:], mean, std))
    return g.report(), g.session.options.stream.getvalue(), mae


def test_normalised_predictions_scored_against_raw_targets_are_named():
    findings, text, mae = _run(True, lambda pred, y, t, mean, std: (pred - y).abs().mean())
    assert slugs(findings) == ["predictions-not-denormalised"], text
    assert "test_scoring_units.py:" in findings[0].where
    assert mae > 100  # the metric the bug reports (the twin's is about 45)


def test_predictions_in_the_targets_units_are_quiet():
    findings, text, mae = _run(True, lambda pred, y, t, mean, std: (pred * std + mean - y).abs().mean())
    assert findings == [], text
    assert mae < 60
    findings, text, _ = _run(True, lambda pred, y, t, mean, std: torch.sub(pred, t).abs().mean())
    assert findings == [], text  # scored against the normalised targets
    findings, text, mae = _run(False, lambda pred, y, t, mean, std: (y - pred).abs().mean())
    assert findings == [], text  # trained on the raw targets
