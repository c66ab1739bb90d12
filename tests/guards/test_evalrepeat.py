"""eval-samples-repeated, the values' form (overt/guards/evalrepeat.py, issue 33): an evaluation pass whose every
forward is given the same batch, drawn afresh each time (wandb/examples#444: ``next(iter(val_loader))`` inside the
validation loop), scores one batch many times.  Correct programs near the premise stay silent: iterating the loader,
a timing loop over one tensor, MC dropout, test-time augmentation, a stochastic model sampled on one input, a pass of
two forwards.  Small real runs on digits, found as ``overt run`` finds them."""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, slugs


class Noisy(nn.Module):
    """A model that samples in its forward (a latent drawn per call): its outputs differ on one input."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x + 0.1 * torch.randn_like(x))


def _run(how: str, dropout: bool = False) -> tuple[list, float]:
    x, y = digits()
    order = y[1400:].argsort(stable=True)  # the evaluation set stored by class
    val = DataLoader(TensorDataset(x[1400:][order], y[1400:][order]), batch_size=64, shuffle=False)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    acc = 0.0
    try:
        torch.manual_seed(0)
        if how == "noisy":
            model = Noisy()
        else:
            layers = [nn.Linear(64, 64), nn.ReLU()] + ([nn.Dropout(0.3)] if dropout else []) + [nn.Linear(64, 10)]
            model = nn.Sequential(*layers)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for epoch in range(2):
            model.train()
            for i in range(20):
                j = i * 64
                loss = F.cross_entropy(model(x[j:j + 64]), y[j:j + 64])
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                correct = 0.0
                if how == "next_iter":
                    for _ in range(len(val)):
                        xb, yb = next(iter(val))
                        correct += (model(xb).argmax(1) == yb).float().mean().item()
                    acc = correct / len(val)
                elif how == "next_iter_kw":  # a model called with keywords only (HF style)
                    for _ in range(len(val)):
                        xb, yb = next(iter(val))
                        correct += (model(input=xb).argmax(1) == yb).float().mean().item()
                    acc = correct / len(val)
                elif how == "loop_kw":
                    for xb, yb in val:
                        correct += (model(input=xb).argmax(1) == yb).float().mean().item()
                    acc = correct / len(val)
                elif how == "fixed_slice":
                    xv, yv = x[1400:], y[1400:]
                    for i in range(0, len(xv), 64):
                        xb, yb = xv[0:64], yv[0:64]  # the loop index is not used
                        correct += (model(xb).argmax(1) == yb).float().mean().item()
                    acc = correct / 7
                elif how == "loop":
                    for xb, yb in val:
                        correct += (model(xb).argmax(1) == yb).float().mean().item()
                    acc = correct / len(val)
                elif how == "timing":  # one tensor, forwarded again and again
                    xb = x[1400:1464]
                    for _ in range(10):
                        model(xb)
                elif how in ("mc_dropout", "noisy"):  # T samples of one input drawn afresh (MC dropout)
                    model.eval()
                    for m in model.modules():
                        if isinstance(m, nn.Dropout):
                            m.train()
                    for _ in range(8):
                        xb, yb = next(iter(val))
                        acc = (model(xb).argmax(1) == yb).float().mean().item()
                elif how == "tta":  # the same batch, its rows in another order at each forward (views told apart)
                    xb, yb = next(iter(val))
                    for k in range(4):
                        xb2, _ = next(iter(val))
                        correct += (model(xb2.roll(k, 0)).argmax(1) == yb.roll(k, 0)).float().mean().item()
                    acc = correct / 4
                elif how == "two":  # two forwards only: not judged
                    for _ in range(2):
                        xb, yb = next(iter(val))
                        acc = (model(xb).argmax(1) == yb).float().mean().item()
    finally:
        findings = session.close()
    return findings, acc


def test_a_new_iterator_at_every_validation_step_is_named():
    findings, acc = _run("next_iter")
    assert slugs(findings) == ["eval-samples-repeated"]
    f = findings[0]
    assert "same batch" in f.message and "next(iter(loader))" in f.message and "shape [64, 64]" in f.message
    assert "test_evalrepeat.py:" in f.where
    assert 0.0 <= acc <= 1.0


def test_a_model_called_with_keywords_only_is_seen_too():
    """``model(input=xb)``: a forward pre-hook without kwargs sees no positional input (HF-style models called
    with ``input_ids=...``); the inputs are the keywords' values. Iterating the loader the same way is silent."""
    findings, _ = _run("next_iter_kw")
    assert slugs(findings) == ["eval-samples-repeated"]
    findings, acc = _run("loop_kw")
    assert findings == [] and acc > 0.5, findings


def test_a_slice_that_does_not_move_with_the_loop_is_named():
    findings, _ = _run("fixed_slice")
    assert slugs(findings) == ["eval-samples-repeated"]


def test_iterating_the_loader_is_silent():
    findings, acc = _run("loop")
    assert findings == [], findings
    assert acc > 0.5


def test_a_timing_loop_over_one_tensor_is_silent():
    assert _run("timing")[0] == []


def test_mc_dropout_and_a_sampling_model_are_silent():
    assert _run("mc_dropout", dropout=True)[0] == []
    assert _run("noisy")[0] == []


def test_test_time_augmentation_and_two_forwards_are_silent():
    assert _run("tta")[0] == []
    assert _run("two")[0] == []
