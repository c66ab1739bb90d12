"""pruning-removes-one-sign widened to the weight a forward computes (overt/guards/quantsign.py, issue 33, the wild
corpus's w351): an MLP trained on digits in float, then fine-tuned with a fake quantiser on each weight
(quantisation-aware training).  Planted: an asymmetric 0-255 grid whose zero point is left at 0 (every negative
weight clamped to 0 in the forward, ModelTC/MQBench#180); its twin sets the zero point from the weights' minimum.
Silent near the premise: a symmetric signed grid, weights kept non-negative by design through ``relu`` (a
continuous reparametrisation, not a quantiser), the float phase before the quantisers are attached."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run, slugs

SLUG = "pruning-removes-one-sign"


class FakeQuant(nn.Module):
    """A learnable-scale fake quantiser with a straight-through round; ``mode``: "zp0" (asymmetric, zero point
    left at 0: the bug), "asym" (zero point set), "sym" (signed, -127..127)."""

    def __init__(self, w, mode):
        super().__init__()
        lo, hi = float(w.min()), float(w.max())
        if mode == "sym":
            self.qmin, self.qmax, zp = -127, 127, 0.0
            self.scale = nn.Parameter(torch.tensor(max(-lo, hi) / 127))
        else:
            self.qmin, self.qmax = 0, 255
            self.scale = nn.Parameter(torch.tensor((hi - lo) / 255))
            zp = 0.0 if mode == "zp0" else float(round(-lo / ((hi - lo) / 255)))
        self.register_buffer("zero_point", torch.tensor(zp))

    def forward(self, w):
        v = w / self.scale + self.zero_point
        q = torch.clamp(torch.round(v), self.qmin, self.qmax)
        q = v + (q - v).detach()
        return (q - self.zero_point) * self.scale


class NonNegative(nn.Module):
    """Weights kept non-negative by design: relu of the stored weight (half of it exactly zero, one sign)."""

    def forward(self, w):
        return F.relu(w)


class QLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, self.wq(self.weight), self.bias)


def _run(make):
    def train():
        torch.manual_seed(0)
        model = nn.Sequential(QLinear(64, 64), nn.ReLU(), QLinear(64, 10))
        for m in (model[0], model[2]):
            m.wq = nn.Identity()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for xb, yb in batches(64, 20):  # float training: the weights take both signs
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        for m in (model[0], model[2]):
            m.wq = make(m.weight.detach())
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, yb in batches(64, 20, start=20):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()

    return guarded_run(train)[0]


def test_an_unsigned_grid_whose_zero_point_is_left_at_zero_is_named_at_the_quantiser():
    findings = [f for f in _run(lambda w: FakeQuant(w, "zp0")) if f.slug == SLUG]
    assert len(findings) == 2, findings  # one per quantised weight
    f = findings[0]
    assert f.severity == "error"
    assert "FakeQuant.forward at tests/guards/test_quantsign.py:" in f.where
    assert "0.weight" in f.message and "exactly zero" in f.message and "zero point" in f.fix


def test_a_grid_with_its_zero_point_set_a_signed_grid_and_relu_weights_are_quiet():
    assert SLUG not in slugs(_run(lambda w: FakeQuant(w, "asym")))
    assert SLUG not in slugs(_run(lambda w: FakeQuant(w, "sym")))
    assert SLUG not in slugs(_run(lambda w: NonNegative()))
