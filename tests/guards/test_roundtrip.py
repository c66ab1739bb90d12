"""inverse-transform-not-inverse (issue 33, the wild corpus's w186): a transform whose named inverse does not
undo it.  Planted on digits: reversible instance normalisation kept inside the model whose ``normalize`` only
centres while ``denormalize`` multiplies by the standard deviation (WenjieDu/PyPOTS#453), under ``overt.guard``;
a user's target scaler over numpy arrays whose ``inverse_transform`` adds a mean ``transform`` never
subtracted, under a session that finds models itself (``overt run``'s way); each with its twin.  Silent: a
mask that zeroes the left-out elements (compared only where the output is not zero), an inverse that needs
more than one argument, an encoder whose output has another shape."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded, guarded_run, slugs

SLUG = "inverse-transform-not-inverse"


class RevIN(nn.Module):
    def __init__(self, scale=True, masked=False):
        super().__init__()
        self.scale, self.masked = scale, masked

    def normalize(self, x):
        self.mean = x.mean(1, keepdim=True)
        self.std = x.std(1, keepdim=True) + 1e-5
        x = x - self.mean
        if self.scale:
            x = x / self.std
        if self.masked:
            x = x * (torch.arange(x.shape[1]) % 5 != 0)  # every fifth reading missing: zeroed
        return x

    def denormalize(self, y):
        return y * self.std + self.mean


class Forecaster(nn.Module):
    """Forecasts the last 16 pixels of a digit from the first 48, per-sample normalised."""

    def __init__(self, revin):
        super().__init__()
        torch.manual_seed(0)
        self.revin = revin
        self.net = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, x):
        return self.revin.denormalize(self.net(self.revin.normalize(x)))


def _series():
    x, _ = digits()
    return 3.0 + 2.0 * x[:, :48] + 0.1 * torch.arange(48), 3.0 + 2.0 * x[:, 48:] + 0.1 * torch.arange(48, 64)


def _forecast(revin, steps=8):
    ctx, target = _series()
    model = Forecaster(revin)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt)
    for i in range(0, 64 * steps, 64):
        opt.zero_grad()
        F.mse_loss(model(ctx[i:i + 64]), target[i:i + 64]).backward()
        opt.step()
    return g.report()


def test_revin_without_scaling_is_named():
    findings = _forecast(RevIN(scale=False))
    assert SLUG in slugs(findings)
    f = next(f for f in findings if f.slug == SLUG)
    assert "RevIN.denormalize does not undo RevIN.normalize" in f.message and "test_roundtrip.py" in f.where


def test_revin_twin_is_quiet():
    assert SLUG not in slugs(_forecast(RevIN(scale=True)))


def test_masked_revin_twin_is_quiet():
    assert SLUG not in slugs(_forecast(RevIN(scale=True, masked=True)))


class TargetScaler:
    def __init__(self, centre=True):
        self.centre = centre

    def fit(self, y):
        self.mean, self.std = y.mean(0), y.std(0) + 1e-8
        return self

    def transform(self, y):
        return ((y - self.mean) if self.centre else y) / self.std

    def inverse_transform(self, y):
        return y * self.std + self.mean


def _regress(centre):
    def train():
        x, labels = digits()
        y = (labels.numpy().astype(np.float64)[:, None] * 10.0 + 50.0).repeat(2, 1)
        scaler = TargetScaler(centre).fit(y[:1200])
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for i in range(0, 1152, 64):
            target = torch.tensor(scaler.transform(y[i:i + 64]), dtype=torch.float32)
            opt.zero_grad()
            F.mse_loss(model(x[i:i + 64]), target).backward()
            opt.step()

    findings, _ = guarded_run(train)
    return findings


def test_scaler_inverse_adds_a_mean_never_subtracted_is_named_under_run():
    assert SLUG in slugs(_regress(centre=False))


def test_scaler_twin_is_quiet_under_run():
    assert SLUG not in slugs(_regress(centre=True))


def test_pairs_are_read_from_the_class_and_the_inverse_must_take_one_argument():
    from overt.guards.roundtrip import _one_argument, _pairs_of

    class TwoArgInverse(RevIN):
        def denormalize(self, y, stats):
            return y * stats[1] + stats[0]

    class Flow:
        def warp(self, x):
            return x

        def inverse_warp(self, x):
            return x

    assert _pairs_of(RevIN) == [("normalize", "denormalize")]
    assert ("transform", "inverse_transform") in _pairs_of(TargetScaler)
    assert _pairs_of(Flow) == [("warp", "inverse_warp")]
    assert _one_argument(RevIN().denormalize) and not _one_argument(TwoArgInverse().denormalize)
