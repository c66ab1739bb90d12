"""Checks judged per object, not once per session (issue 35 item 1, issue 33 w45): a model and an
optimizer made after the first optimizer's warm-up (fine-tuning after pre-training, a second
stage) get their own judgement, found as ``overt run`` finds them (PyTorch's global hooks)."""

from __future__ import annotations

import io

import torch
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, slugs


class Classifier(nn.Module):
    def __init__(self, encoder: nn.Module, n_classes: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(32, n_classes)

    def forward(self, x):
        return self.head(self.encoder(x))


def _fit(model, opt, steps=12):
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def _two_stages(head_in_optimizer: bool) -> list:
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        encoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        pretrain = Classifier(encoder, 10)
        _fit(pretrain, torch.optim.SGD(pretrain.parameters(), lr=0.1))  # the first optimizer's warm-up ends here
        model = Classifier(encoder, 10)  # a new head, made after it
        groups = [{"params": model.encoder.parameters(), "lr": 1e-3}]
        if head_in_optimizer:
            groups.append({"params": model.head.parameters(), "lr": 0.1})
        _fit(model, torch.optim.SGD(groups))
    finally:
        findings = session.close()
    return findings


def test_a_head_left_out_of_a_later_optimizer_is_named():
    findings = _two_stages(head_in_optimizer=False)
    assert slugs(findings) == ["params-not-optimized"]
    assert "head.weight" in findings[0].message and "head.bias" in findings[0].message
    assert "encoder" not in findings[0].message


def test_a_later_optimizer_holding_its_head_is_quiet():
    assert _two_stages(head_in_optimizer=True) == []
