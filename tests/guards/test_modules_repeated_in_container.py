"""modules-repeated-in-container (issue 33, invariants of correct training): each entry of a ModuleList or
Sequential is its own module.  Planted repetitions of different forms (prediction heads from a multiplied
list, a starred Sequential of a repeated block, a comprehension over one prebuilt expert, a helper that
repeats its argument) and clean twins, trained a few steps on digits."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs, train


def res_block(h):
    return nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))


class MultiHead(nn.Module):
    def __init__(self, bug, h=32, k=3):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(64, h), nn.ReLU())
        if bug:
            self.heads = nn.ModuleList([res_block(h)] * k)
        else:
            self.heads = nn.ModuleList([res_block(h) for _ in range(k)])

    def forward(self, x):
        z = self.trunk(x)
        return sum(head(z) for head in self.heads)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


class Deep(nn.Module):
    def __init__(self, bug, d=32, n=3):
        super().__init__()
        self.inp = nn.Linear(64, d)
        self.blocks = nn.Sequential(*[Block(d)] * n) if bug else nn.Sequential(*[Block(d) for _ in range(n)])
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


class Experts(nn.Module):
    def __init__(self, bug, d=32, n=4):
        super().__init__()
        self.inp = nn.Linear(64, d)
        expert = nn.Sequential(nn.Linear(d, d), nn.GELU())
        fresh = [nn.Sequential(nn.Linear(d, d), nn.GELU()) for _ in range(n)]
        self.experts = nn.ModuleList([expert for _ in range(n)] if bug else fresh)
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        z = self.inp(x)
        return self.out(torch.stack([e(z) for e in self.experts]).mean(0))


def clones(module, n):
    return nn.ModuleList([module] * n)


class Cloned(nn.Module):
    def __init__(self, bug, d=32, n=2):
        super().__init__()
        self.inp = nn.Linear(64, d)
        self.layers = clones(Block(d), n) if bug else nn.ModuleList([Block(d) for _ in range(n)])
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


def _run(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=5)
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("make,count", [(MultiHead, 3), (Deep, 3), (Experts, 4), (Cloned, 2)])
@pytest.mark.parametrize("bug", [True, False])
def test_one_module_repeated(make, count, bug):
    torch.manual_seed(0)
    findings, text = _run(make(bug))
    if bug:
        assert slugs(findings) == ["modules-repeated-in-container"], text
        assert f"at {count} of its {count} positions" in text
        assert re.search(r"built at \S*test_modules_repeated_in_container\.py:\d+", text), text
    else:
        assert findings == [], text


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        self.fcs = nn.ModuleList([nn.Linear(64, 64), nn.Linear(64, 10)])
        self.acts = nn.ModuleList([nn.ReLU()] * 2)  # parameterless: nothing to share

    def forward(self, x):
        return self.acts[1](self.fcs[1](self.acts[0](self.fcs[0](x))))


class Recurrent(nn.Module):
    """One block applied at every depth: weight sharing, as in the Universal Transformer."""

    def __init__(self, d=32, n=3):
        super().__init__()
        self.inp = nn.Linear(64, d)
        block = Block(d)
        self.blocks = nn.ModuleList([block] * n)
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


@pytest.mark.parametrize("make", [Activations, Recurrent])
def test_parameterless_or_meant_sharing_is_quiet(make):
    torch.manual_seed(0)
    findings, text = _run(make())
    assert findings == [], text


def test_a_model_that_is_the_container_is_left_to_lint():
    """``nn.Sequential(*[...] * n)`` as the whole model: no class of the user's to read whether it was meant."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), *[nn.Linear(32, 32)] * 2, nn.Linear(32, 10))
    findings, text = _run(model)
    assert "modules-repeated-in-container" not in slugs(findings), text
