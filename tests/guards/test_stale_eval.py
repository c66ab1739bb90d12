"""eval-model-stale (overt/guards/stale_eval.py, issue 33): evaluating a copy of the model made
once before training; evaluating the trained model, an EMA that is updated, and a frozen teacher
run once per training step stay quiet.  Found as ``overt run`` finds them (global hooks, a model
switched to eval mode), on small real runs on digits."""

from __future__ import annotations

import copy
import io

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, mlp, slugs


def _run(evaluate: str) -> list:
    x, y = digits()
    train = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=64)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        copied = copy.deepcopy(model)  # made once, before training
        teacher = copy.deepcopy(model).eval()
        for epoch in range(3):
            model.train()
            for xb, yb in train:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb), yb)
                if evaluate == "teacher":  # a frozen teacher, once per training step: not an evaluation
                    with torch.no_grad():
                        soft = teacher(xb).softmax(-1)
                    loss = loss + 0.1 * nn.functional.cross_entropy(model(xb), soft)
                loss.backward()
                opt.step()
                if evaluate == "ema":
                    with torch.no_grad():
                        for e, p in zip(copied.parameters(), model.parameters()):
                            e.lerp_(p, 0.1)
            target = model if evaluate in ("model", "teacher") else copied
            target.eval()
            with torch.no_grad():
                correct = sum(int((target(xb).argmax(1) == yb).sum()) for xb, yb in val)
    finally:
        findings = session.close()
    assert correct >= 0
    return findings


def test_evaluating_a_copy_made_before_training_is_named():
    findings = _run("copy")
    assert slugs(findings) == ["eval-model-stale"]
    assert findings[0].message.startswith("Sequential#") and "never updates" in findings[0].message


def test_evaluating_the_model_an_updated_ema_or_beside_a_teacher_is_quiet():
    for evaluate in ("model", "ema", "teacher"):
        assert _run(evaluate) == [], evaluate


class _AutoEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


def test_a_model_switched_to_eval_is_watched_but_its_layers_are_not_models():
    # model.eval() switches every submodule through the same Module.train, children first: a
    # sanity evaluation before training (as Lightning runs one) registered each Linear and
    # Sequential as a model of its own, whose hidden inputs train-serve-skew then compared
    # between early training and the end (4 false findings on Lightning's autoencoder example)
    x, _ = digits()
    train = DataLoader(TensorDataset(x[:640]), batch_size=64, shuffle=True)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = _AutoEncoder()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.eval()
        with torch.no_grad():
            model(x[1500:1564])
        for epoch in range(3):
            model.train()
            for (xb,) in train:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb), xb).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for start in range(1500, 1790, 64):
                    model(x[start:start + 64])
        names = sorted(info.name for info in session.models.values())
    finally:
        findings = session.close()
    assert names == ["_AutoEncoder"]
    assert findings == []
