"""eval-pass-changes-training, swapped-in form (overt/guards/swapback.py, issue 33): a running average of the weights
copied into the trained model for an evaluation and never put back (huggingface/diffusers#2321): training goes on
from the average.  Correct programs near the premise stay silent: the trained weights stored and restored around the
evaluation, the average evaluated as a module of its own, a per-step clamp after the step, a once-per-round average
loaded into the model (FedAvg), the average copied in once after training.  Small real runs on digits, found as
``overt run`` finds them."""

from __future__ import annotations

import copy
import io

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, slugs

SLUG = "eval-pass-changes-training"


class ListEMA:
    def __init__(self, params, decay):
        self.decay = decay
        self.shadow = [p.detach().clone() for p in params]
        self.stored = None

    @torch.no_grad()
    def update(self, params):
        for s, p in zip(self.shadow, params):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)

    @torch.no_grad()
    def copy_to(self, params):
        for s, p in zip(self.shadow, params):
            p.copy_(s)

    @torch.no_grad()
    def store(self, params):
        self.stored = [p.detach().clone() for p in params]

    @torch.no_grad()
    def restore(self, params):
        for s, p in zip(self.stored, params):
            p.copy_(s)


class DictEMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

    @torch.no_grad()
    def update(self, model):
        for n, p in model.named_parameters():
            self.shadow[n].lerp_(p, 1 - self.decay)


def _run(how: str, steps: int = 120) -> list:
    x, y = digits()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        ema = ListEMA(model.parameters(), 0.99)
        dema = DictEMA(model, 0.98)
        emodel = copy.deepcopy(model)
        rounds = {n: p.detach().clone() for n, p in model.named_parameters()}
        for step in range(1, steps + 1):
            j = step * 32 % 1400
            loss = F.cross_entropy(model(x[j:j + 32]), y[j:j + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if how == "clamp":
                with torch.no_grad():
                    for p in model.parameters():
                        p.clamp_(-0.3, 0.3)
            ema.update(model.parameters())
            dema.update(model)
            with torch.no_grad():
                for e, p in zip(emodel.parameters(), model.parameters()):
                    e.lerp_(p, 0.01)
            if step % 10:
                continue
            if how == "fedavg":  # a round's average (of this model and the previous round's), loaded in
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        rounds[n].copy_((rounds[n] + p) / 2)
                model.load_state_dict(rounds)
            if how in ("bug", "twin"):
                if how == "twin":
                    ema.store(model.parameters())
                ema.copy_to(model.parameters())
            if how == "dict":
                model.load_state_dict(dema.shadow)
            with torch.no_grad():
                net = emodel if how == "module" else model
                acc = (net(x[1500:]).argmax(1) == y[1500:]).float().mean().item()
            if how == "twin":
                ema.restore(model.parameters())
        if how == "end":
            ema.copy_to(model.parameters())
            with torch.no_grad():
                acc = (model(x[1500:]).argmax(1) == y[1500:]).float().mean().item()
    finally:
        findings = session.close()
    assert 0.0 <= acc <= 1.0
    return findings


def test_average_left_in_the_trained_model_is_reported():
    found = [f for f in _run("bug") if f.slug == SLUG]
    assert len(found) == 1, found
    assert "ema.shadow" in found[0].message and "test_swapback.py:" in found[0].message
    assert found[0].fix


def test_average_kept_as_a_dictionary_loaded_in_is_reported():
    found = [f for f in _run("dict") if f.slug == SLUG]
    assert len(found) == 1 and "dema.shadow" in found[0].message, found


def test_correct_programs_near_the_premise_stay_silent():
    for how in ("twin", "module", "clamp", "fedavg", "end", "none"):
        assert SLUG not in slugs(_run(how)), how
