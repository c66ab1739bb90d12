"""freeze-not-applied (overt/guards/freezeattr.py, issue 33): ``module.requires_grad = False`` sets an
attribute PyTorch never reads, so the layer meant to stay frozen trains (MICCAI23-ProtoContra-SFDA#18);
``= True`` meant to unfreeze leaves it frozen.  Small real runs on digits, as ``overt run`` finds them."""

from __future__ import annotations

import io

import torch
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, slugs


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        self.outc = nn.Linear(32, 10)

    def forward(self, x):
        return self.outc(self.backbone(x))


class FlagNet(Net):
    """A model that manages its own flag: its train() applies it to the backbone."""

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.requires_grad_(getattr(self, "requires_grad", True))
        return self


def _train(freeze, later=None) -> list:
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=5), auto=True)
    try:
        model = freeze()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for i, (xb, yb) in enumerate(batches(64, n=24)):
            if i == 10 and later is not None:
                later(model)
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    finally:
        findings = session.close()
    return findings


def _attribute_freeze() -> nn.Module:
    model = Net()
    model.backbone.requires_grad = False  # noqa: OVT127  the bug: an attribute, nothing is frozen
    return model


def _frozen_backbone() -> nn.Module:
    model = Net()
    model.backbone.requires_grad_(False)  # the first steps train the head only
    return model


def _attribute_unfreeze(model: nn.Module) -> None:
    model.backbone.requires_grad = True  # meant to unfreeze the backbone: it stays frozen


def test_a_freeze_set_on_the_module_is_named():
    findings = _train(_attribute_freeze)
    assert slugs(findings) == ["freeze-not-applied"]
    assert "Net.backbone.requires_grad = False" in findings[0].message
    assert "requires_grad_(False)" in findings[0].message


def test_an_unfreeze_set_on_the_module_is_named():
    findings = _train(_frozen_backbone, later=_attribute_unfreeze)
    assert slugs(findings) == ["freeze-not-applied"]
    assert "Net.backbone.requires_grad = True" in findings[0].message and "never train" in findings[0].message


def test_an_unfreeze_through_the_method_is_quiet():
    assert _train(_frozen_backbone, later=lambda model: model.backbone.requires_grad_(True)) == []


def test_a_freeze_through_the_method_is_quiet():
    def method() -> nn.Module:
        model = Net()
        model.backbone.requires_grad_(False)
        return model

    assert _train(method) == []


def test_a_flag_the_model_reads_itself_is_quiet():
    def flagged() -> nn.Module:
        model = FlagNet()
        model.requires_grad = False  # read by FlagNet.train()
        return model

    assert _train(flagged) == []
