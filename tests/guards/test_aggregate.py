"""average-diverges-from-model, aggregate form (overt/guards/aggregate.py, issue 33): a model set to a combination of
copies trained from it whose coefficients sum to more than one (ssg-research/WAFFLE#6) grows beyond every copy.
Correct programs near the premise stay silent: FedAvg by 1/k, FedAvg weighted by client sizes, a server step with
momentum, an ensemble of independently initialised members trained in turn.  Small real runs on digits, found as
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

SLUG = "average-diverges-from-model"


def _fed(how: str, rounds: int = 4, clients: int = 10, chosen: int = 4) -> list:
    x, y = digits()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        shards = torch.arange(1400).chunk(clients)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.5 if how == "momentum" else 0.0)
        for _ in range(rounds):
            picked = torch.randperm(clients)[:chosen].tolist()
            sizes = [len(shards[c]) - 7 * i for i, c in enumerate(picked)]
            agg = [torch.zeros_like(p) for p in model.parameters()]
            for i, c in enumerate(picked):
                local = copy.deepcopy(model)
                lopt = torch.optim.SGD(local.parameters(), lr=0.1)
                idx = shards[c][:sizes[i]]
                for _ in range(3):
                    loss = F.cross_entropy(local(x[idx]), y[idx])
                    lopt.zero_grad()
                    loss.backward()
                    lopt.step()
                coef = {"bug": chosen * 5 / clients, "twin": 1 / chosen, "momentum": 1 / chosen,
                        "weighted": sizes[i] / sum(sizes)}[how]
                with torch.no_grad():
                    for a, p in zip(agg, local.parameters()):
                        a += coef * p
            for p, a in zip(model.parameters(), agg):
                p.grad = p.detach() - a
            opt.step()
        with torch.no_grad():
            acc = (model(x[1500:]).argmax(1) == y[1500:]).float().mean().item()
    finally:
        findings = session.close()
    assert acc == acc
    return findings


def _ensemble() -> list:
    x, y = digits()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        members = [nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)) for _ in range(3)]
        opts = [torch.optim.SGD(m.parameters(), lr=0.5) for m in members]
        for step in range(30):
            j = step * 32 % 1400
            for m, o in zip(members, opts):
                loss = F.cross_entropy(m(x[j:j + 32]), y[j:j + 32])
                o.zero_grad()
                loss.backward()
                o.step()
    finally:
        findings = session.close()
    return findings


def test_coefficients_summing_to_more_than_one_are_reported():
    found = [f for f in _fed("bug") if f.slug == SLUG]
    assert len(found) == 1, found
    assert "copies trained from its own weights" in found[0].message and found[0].fix
    assert "test_aggregate.py:" in found[0].message


def test_correct_aggregations_stay_silent():
    for how in ("twin", "weighted", "momentum"):
        assert SLUG not in slugs(_fed(how)), how
    assert SLUG not in slugs(_ensemble())
