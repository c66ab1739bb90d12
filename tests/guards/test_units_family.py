"""predictions-not-denormalised across the forms of the bug (overt/guards/units.py, issue 33): a target
transform (scikit-learn's StandardScaler, min-max scaling, log1p, a manual mean/std, per-series
normalisation, per-column standardisation) applied for training and missing on one side of the
evaluation error, applied twice or undone with another column's statistics, on tabular, time-series and
image regression, each with a twin that scores in one set of units.  The evaluation error is a functional
loss, a loss module, a subtraction or a scikit-learn metric.  Real small runs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, run_script_probe, slug_set, slugs


def _tabular(positive: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y): 600 rows of 8 features; y in the thousands, learnable (y > 0 when ``positive``)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 8, generator=g)
    w = torch.randn(8, generator=g)
    z = torch.tanh(x @ w / 3) + 0.05 * torch.randn(600, generator=g)
    y = torch.exp(6 + z) if positive else 1000 + 300 * z
    return x, y


def _series() -> tuple[torch.Tensor, torch.Tensor]:
    """(context, horizon): sensor series at very different levels and scales, 32 steps then 8."""
    g = torch.Generator().manual_seed(1)
    t = torch.arange(40, dtype=torch.float32)
    level = 50 * torch.randn(800, 1, generator=g)
    scale = torch.exp(torch.empty(800, 1).uniform_(math.log(0.5), math.log(5.0), generator=g))
    phase = 6.28 * torch.rand(800, 1, generator=g)
    y = level + scale * (torch.sin(0.3 * t + phase) + 0.05 * torch.randn(800, 40, generator=g))
    return y[:, :32], y[:, 32:]


def _ink() -> tuple[torch.Tensor, torch.Tensor]:
    """(digits images, total ink of each image in raw pixel units): an image regression."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32)
    return x / 16.0, x.sum(1)


def _fit(x: torch.Tensor, target: torch.Tensor, steps: int = 30, lr: float = 1e-2, n: int = 500):
    """Train an MLP on the first ``n`` rows (Adam, batches of 50), guarded; return (model, guard)."""
    torch.manual_seed(0)
    out = target.shape[1] if target.dim() == 2 else 1
    model = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, out))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(steps):
        for i in range(0, n, 50):
            opt.zero_grad()
            pred = model(x[i:i + 50])
            F.mse_loss(pred.squeeze(1) if out == 1 else pred, target[i:i + 50]).backward()
            opt.step()
    model.eval()
    return model, g


def _findings(g) -> tuple[list, str]:
    findings = g.report()
    return findings, g.session.options.stream.getvalue()


def _scaler(bug: bool):
    from sklearn.preprocessing import StandardScaler

    x, y = _tabular()
    scaler = StandardScaler().fit(y[:500, None].numpy())
    model, g = _fit(x, torch.tensor(scaler.transform(y[:, None].numpy()), dtype=torch.float32)[:, 0])
    with torch.no_grad():
        pred = model(x[500:])
        if not bug:
            pred = torch.tensor(scaler.inverse_transform(pred.numpy()), dtype=torch.float32)
        error = F.l1_loss(pred.squeeze(1), y[500:]).item()
    return g, error


def _log1p(bug: bool):
    x, y = _tabular(positive=True)
    model, g = _fit(x, torch.log1p(y))
    criterion = nn.MSELoss()
    with torch.no_grad():
        out = model(x[500:]).squeeze(1)
        error = criterion(out if bug else torch.expm1(out), y[500:]).item()
    return g, error


def _inverted_twice(bug: bool):
    x, y = _tabular()
    std, mean = torch.std_mean(y[:500])
    model, g = _fit(x, (y - mean) / std)
    with torch.no_grad():
        pred = model(x[500:]).squeeze(1) * std + mean
        if bug:
            pred = pred * std + mean  # denormalised again by a helper that expects normalised values
        error = F.smooth_l1_loss(pred, y[500:]).item()
    return g, error


def _sklearn_metric(bug: bool):
    import sklearn.metrics as skm

    x, y = _tabular()
    lo, hi = y[:500].min(), y[:500].max()
    model, g = _fit(x, (y - lo) / (hi - lo))
    with torch.no_grad():
        pred = model(x[500:]).squeeze(1).numpy()
    if not bug:
        pred = pred * (hi - lo).item() + lo.item()
    return g, skm.mean_absolute_error(y[500:].numpy(), pred)


def _columns_swapped(bug: bool):
    """Two targets in very different units, standardised per column; the bug undoes the standardisation
    with the columns' statistics in the wrong order."""
    x, y = _tabular()
    y2 = torch.stack([y, 0.5 + (y - 1000) / 3000], 1)  # a price and a rate, each learnable
    std, mean = y2[:500].std(0), y2[:500].mean(0)
    model, g = _fit(x, (y2 - mean) / std)
    with torch.no_grad():
        out = model(x[500:])
        pred = out * std.flip(0) + mean.flip(0) if bug else out * std + mean
        error = F.l1_loss(pred, y2[500:]).item()
    return g, error


def _gathered(bug: bool):
    """The evaluation loop's outputs gathered with torch.cat, then subtracted from the raw targets."""
    x, y = _tabular()
    std, mean = torch.std_mean(y[:500])
    model, g = _fit(x, (y - mean) / std)
    outputs = []
    with torch.no_grad():
        for i in range(500, 600, 25):
            outputs.append(model(x[i:i + 25]))
        pred = torch.cat(outputs).squeeze(1)
        if not bug:
            pred = pred * std + mean
        error = (pred - y[500:]).abs().mean().item()
    return g, error


def _normalised_targets(bug: bool):
    x, y = _tabular()
    std, mean = torch.std_mean(y[:500])
    target = (y - mean) / std
    model, g = _fit(x, target)
    with torch.no_grad():
        pred = model(x[500:]).squeeze(1)
        # the bug puts the predictions back in the targets' units and scores them against the normalised targets
        error = F.huber_loss(pred * std + mean if bug else pred, target[500:]).item() * (std.item() if bug else 1)
    return g, error


def _per_series(bug: bool):
    ctx, hor = _series()
    m, s = ctx.mean(1, keepdim=True), ctx.std(1, keepdim=True)
    model, g = _fit((ctx - m) / s, (hor - m) / s, steps=20, lr=3e-3, n=700)
    with torch.no_grad():
        out = model((ctx[700:] - m[700:]) / s[700:])
        if bug:
            error = (out - hor[700:]).square().mean().item()
        else:
            error = (out * s[700:] + m[700:] - hor[700:]).square().mean().item()
    return g, error


def _min_max_images(bug: bool):
    x, ink = _ink()
    lo, hi = ink[:1400].min(), ink[:1400].max()
    model, g = _fit(x, (ink - lo) / (hi - lo), steps=15, n=1400)
    with torch.no_grad():
        pred = model(x[1400:]).squeeze(1)
        error = F.l1_loss(pred if bug else pred * (hi - lo) + lo, ink[1400:]).item()
    return g, error


FORMS = {"scaler": _scaler, "log1p": _log1p, "inverted-twice": _inverted_twice, "gathered-by-cat": _gathered,
         "column-statistics-swapped": _columns_swapped, "sklearn-min-max": _sklearn_metric,
         "denormalised-against-normalised": _normalised_targets, "per-series": _per_series,
         "min-max-images": _min_max_images}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_units_broken_on_one_side_are_named(form):
    g, error = FORMS[form](True)
    findings, text = _findings(g)
    assert slugs(findings) == ["predictions-not-denormalised"], text
    assert "test_units_family.py:" in findings[0].where, findings[0].where
    twin, twin_error = FORMS[form](False)
    twin.report(quiet=True)
    assert twin_error < error  # the metric the bug reports is worse than the twin's


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_twins_in_one_set_of_units_are_quiet(form):
    g, _ = FORMS[form](False)
    findings, text = _findings(g)
    assert findings == [], text


def test_an_untrained_model_is_not_judged():
    """A model that did not fit its targets (one epoch at a tiny learning rate) proves nothing about its units."""
    x, y = _tabular()
    std, mean = torch.std_mean(y[:500])
    model, g = _fit(x, (y - mean) / std, steps=1, lr=1e-6)
    with torch.no_grad():
        pred = model(x[500:]).squeeze(1) * std + mean
        F.mse_loss(pred * 50, y[500:])  # an arbitrary transform: nothing is known of an unfitted model's units
    findings, text = _findings(g)
    assert "predictions-not-denormalised" not in slugs(findings), text


def test_a_loss_on_another_quantity_in_evaluation_is_quiet():
    """An evaluation loss between quantities in one set of units that are not the model's targets."""
    x, y = _tabular()
    std, mean = torch.std_mean(y[:500])
    model, g = _fit(x, (y - mean) / std)
    with torch.no_grad():
        model(x[500:])
        F.mse_loss(x[500:] * 2, x[500:])
        F.mse_loss(model(x[500:]).squeeze(1), (y[500:] - mean) / std)
    findings, text = _findings(g)
    assert findings == [], text


_SCRIPT = """
from sklearn.metrics import mean_squared_error
from sklearn.preprocessing import StandardScaler

g = torch.Generator().manual_seed(0)
feats = torch.randn(600, 8, generator=g)
price = 1000 + 300 * torch.tanh(feats @ torch.randn(8, generator=g) / 3)
scaler = StandardScaler().fit(price[:500, None].numpy())
target = torch.tensor(scaler.transform(price[:, None].numpy()), dtype=torch.float32)
net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
adam = torch.optim.Adam(net.parameters(), lr=1e-2)
for epoch in range(20):
    for i in range(0, 500, 50):
        adam.zero_grad()
        F.mse_loss(net(feats[i:i + 50]), target[i:i + 50]).backward()
        adam.step()
net.eval()
with torch.no_grad():
    pred = net(feats[500:]).numpy()
print("rmse", mean_squared_error(price[500:].numpy(), PRED) ** 0.5)
"""


@pytest.mark.parametrize("bug", [True, False])
def test_a_scikit_learn_error_imported_by_the_script_is_seen(tmp_path, bug):
    findings = run_script_probe(tmp_path, _SCRIPT.replace("PRED", "pred" if bug else "scaler.inverse_transform(pred)"))
    units = [f for f in findings if f["slug"] == "predictions-not-denormalised"]
    if bug:
        assert len(units) == 1 and "train.py:" in units[0]["where"], findings
    else:
        assert "predictions-not-denormalised" not in slug_set(findings), findings
