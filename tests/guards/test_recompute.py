"""checkpoint-recompute-differs (issue 33; tests/wild w237): an activation checkpoint whose recomputation draws
other random numbers than its forward -- dropout under preserve_rng_state=False (plain and through
checkpoint_sequential), a stochastic-depth block deciding with Python's random, which checkpoint never saves --
each beside a twin that recomputes the same thing (the default preserve_rng_state, the decision drawn from torch);
deterministic blocks under preserve_rng_state=False (BatchNorm in training mode among them) silent, and the
probe leaves the program's numbers exactly as a run without the guard.  Real small runs on the digits."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt
from torch import nn

from tests.guards.helpers import batches, guarded_run, slugs


class Block(nn.Module):
    def __init__(self, width: int, p: float, bn: bool = False, drop_path: str = ""):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.drop = nn.Dropout(p)
        self.bn = nn.BatchNorm1d(width) if bn else nn.Identity()
        self.drop_path = drop_path

    def forward(self, x):
        h = self.drop(F.gelu(self.bn(self.fc(x))))
        if self.drop_path == "python" and self.training and random.random() < 0.3:
            return x
        if self.drop_path == "torch" and self.training and float(torch.rand(())) < 0.3:
            return x
        return x + h


class Net(nn.Module):
    def __init__(self, p: float = 0.3, preserve: bool = True, bn: bool = False, drop_path: str = "",
                 sequential: bool = False):
        super().__init__()
        self.inp = nn.Linear(64, 32)
        self.blocks = nn.Sequential(*[Block(32, p, bn, drop_path) for _ in range(3)])
        self.out = nn.Linear(32, 10)
        self.preserve, self.sequential = preserve, sequential

    def forward(self, x):
        h = self.inp(x)
        if self.sequential:
            h = ckpt.checkpoint_sequential(self.blocks, 3, h, use_reentrant=False, preserve_rng_state=self.preserve)
        else:
            for block in self.blocks:
                h = ckpt.checkpoint(block, h, use_reentrant=False, preserve_rng_state=self.preserve)
        return self.out(h)


def _train(guard: bool, steps: int = 8, **kw) -> tuple[list, str, torch.Tensor, list]:
    torch.manual_seed(0)
    random.seed(0)
    model = Net(**kw)
    losses = []

    def run():
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())

    if guard:
        findings, text = guarded_run(run, check_every=2)
    else:
        run()
        findings, text = [], ""
    state = torch.cat([v.float().flatten() for v in model.state_dict().values()])
    return findings, text, state, losses


def test_dropout_recomputed_without_its_random_state_is_named_at_the_call():
    findings, text, _, _ = _train(True, preserve=False)
    assert slugs(findings) == ["checkpoint-recompute-differs"], text
    assert "checkpoint call at tests/guards/test_recompute.py:" in text and "preserve_rng_state=False" in text, text


def test_checkpoint_sequential_without_the_random_state_is_named():
    findings, text, _, _ = _train(True, preserve=False, sequential=True)
    assert slugs(findings) == ["checkpoint-recompute-differs"], text
    assert "test_recompute.py:" in text, text


def test_stochastic_depth_drawn_from_python_random_is_named_with_the_default():
    findings, text, _, _ = _train(True, p=0.0, drop_path="python")
    assert slugs(findings) == ["checkpoint-recompute-differs"], text
    assert "does not save" in text, text


@pytest.mark.parametrize("kw", [dict(preserve=True), dict(preserve=True, sequential=True),
                                dict(p=0.0, drop_path="torch"), dict(p=0.0, preserve=False),
                                dict(p=0.0, preserve=False, bn=True)],
                         ids=["preserved", "sequential-preserved", "torch-drop-path", "deterministic",
                              "batchnorm-deterministic"])
def test_recomputations_that_repeat_the_forward_are_silent(kw):
    findings, text, _, _ = _train(True, **kw)
    assert "checkpoint-recompute-differs" not in slugs(findings), text


@pytest.mark.parametrize("kw", [dict(preserve=False), dict(p=0.0, preserve=False, bn=True),
                                dict(p=0.0, drop_path="python")], ids=["dropout", "batchnorm", "python-random"])
def test_the_probe_leaves_the_programs_numbers_as_they_were(kw):
    _, _, plain, plain_losses = _train(False, **kw)
    _, _, probed, probed_losses = _train(True, **kw)
    assert plain_losses == probed_losses
    assert torch.equal(plain, probed)
