"""linear-layers-collapse (overt/guards/affinepair.py, issue 33, the wild corpus's w371): two Linear layers applied
one after the other with nothing between them compute one affine map.  Planted: a digits classifier whose hidden
layer feeds the head with no activation (nuscenes-devkit#728's MTP head); its twin puts a ReLU between.  Silent near
the premise: an in-place ReLU between (the same tensor object, its version moved), a low-rank bottleneck (a middle
narrower than both ends), a middle representation that another head also reads, a dropout between."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run

SLUG = "linear-layers-collapse"


class Head(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        width = 8 if mode == "bottleneck" else 128
        self.body = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.fc1 = nn.Linear(64, width)
        self.fc2 = nn.Linear(width, 10)
        self.aux = nn.Linear(128, 10)

    def forward(self, x):
        f = self.body(x)
        if self.mode in ("bug", "bottleneck"):
            return self.fc2(self.fc1(f))
        if self.mode == "relu":
            return self.fc2(F.relu(self.fc1(f)))
        if self.mode == "shared":  # the middle representation feeds a second head too
            h = self.fc1(f)
            return self.fc2(h) + self.aux(h)
        return self.fc2(F.dropout(self.fc1(f), 0.1, self.training))


def _run(make):
    def train():
        torch.manual_seed(0)
        model = make()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, yb in batches(64, 12):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()

    return [f for f in guarded_run(train)[0] if f.slug == SLUG]


def test_two_linear_layers_with_nothing_between_are_named():
    findings = _run(lambda: Head("bug"))
    assert len(findings) == 1, findings
    f = findings[0]
    assert "Head.fc2 (Linear 128 -> 10) is applied to the output of Head.fc1 (Linear 64 -> 128)" in f.message
    assert "single Linear(64, 10)" in f.message and "test_affinepair.py:" in f.where
    assert f.fix and f.severity == "warning"


def test_a_sequential_of_two_linear_layers_is_named_and_an_inplace_relu_between_is_not():
    assert len(_run(lambda: nn.Sequential(nn.Linear(64, 96), nn.Linear(96, 10)))) == 1
    assert _run(lambda: nn.Sequential(nn.Linear(64, 96), nn.ReLU(inplace=True), nn.Linear(96, 10))) == []


def test_an_activation_a_bottleneck_a_shared_middle_and_a_dropout_stay_silent():
    for mode in ("relu", "bottleneck", "shared", "dropout"):
        assert _run(lambda: Head(mode)) == [], mode
