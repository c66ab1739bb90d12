"""``weights-frozen``: all frozen but one bias is reported; a linear probe and LoRA-style
trainable matrices are not."""

from __future__ import annotations

import io

import torch
from torch import nn
from torch.nn import functional as F

import overt
from tests.wild.cases.common import digits_sets


def _train(model: nn.Module) -> list[str]:
    torch.manual_seed(0)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    g = overt.guard(model, opt, stream=io.StringIO())
    train, _ = digits_sets()
    x, y = train.tensors
    for i in range(8):
        loss = F.cross_entropy(model(x[i * 64:(i + 1) * 64]), y[i * 64:(i + 1) * 64])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [f.slug for f in g.report(quiet=True)]


def _mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def test_all_frozen_but_one_bias():
    model = _mlp()
    for p in list(model.parameters())[:-1]:  # an off-by-one freezing loop: only the last bias trains
        p.requires_grad = False
    assert "weights-frozen" in _train(model)


def test_linear_probe_and_adapter_stay_quiet():
    probe = _mlp()
    for p in list(probe.parameters())[:-2]:  # the head (weight and bias) trains
        p.requires_grad = False
    assert "weights-frozen" not in _train(probe)

    class Adapted(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = _mlp()
            for p in self.base.parameters():
                p.requires_grad = False
            self.down = nn.Parameter(torch.zeros(64, 4))
            self.up = nn.Parameter(torch.randn(4, 64) * 0.01)

        def forward(self, x):
            return self.base(x + x @ self.down @ self.up)

    assert "weights-frozen" not in _train(Adapted())
