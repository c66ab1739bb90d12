"""residual-skip-missing, the skip's input overwritten (overt/guards/skipwrite.py, issue 33, the wild corpus's w420):
a residual block adds its input as it was when the block was entered.  Planted: a residual MLP on digits whose
blocks' branch opens with ``nn.ReLU(inplace=True)`` inside an ``nn.Sequential`` (rosinality/vq-vae-2-pytorch#60),
so ``out += x`` adds the rectified input; its twin's ReLU is out of place.  Silent near the premise: ``x += F(x)``
(the write is the sum), an in-place activation whose result the block rebinds (``x = self.act(x)``), a block that
keeps a copy for its skip first, an in-place activation after the sum.  The guarded run trains as the plain one."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run

SLUG = "residual-skip-missing"
D = 48


class ResidualUnit(nn.Module):
    def __init__(self, mode="bug"):
        super().__init__()
        self.mode = mode
        self.branch = nn.Sequential(nn.ReLU(inplace=mode in ("bug", "copied")), nn.Linear(D, D),
                                    nn.ReLU(), nn.Linear(D, D))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        if self.mode == "accumulate":
            x += self.branch(x)
            return x
        if self.mode == "rebound":
            x = self.act(x)
            return x + self.branch(x)
        if self.mode == "copied":
            identity = x.clone()
            out = self.branch(x)
            return out + identity
        if self.mode == "act_after":
            out = self.branch(x)
            out += x
            return self.act(out)
        out = self.branch(x)
        out += x
        return out


def _run(mode, n=2, guard=True):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, D), *[ResidualUnit(mode) for _ in range(n)], nn.Linear(D, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train():
        torch.manual_seed(1)
        for xb, yb in batches(64, 12):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()

    if not guard:
        train()
        return model, []
    return model, [f for f in guarded_run(train)[0] if f.slug == SLUG]


def test_an_inplace_activation_opening_the_branch_is_named_at_the_sum_and_its_twin_is_silent():
    findings = _run("bug")[1]
    assert len(findings) == 1, findings
    f = findings[0]
    assert "in place" in f.message and "`branch`" in f.message
    line = open(__file__).read().splitlines()[int(f.where.rsplit(":", 1)[1]) - 1]
    assert line.strip() == "out += x", f.where
    assert _run("twin")[1] == []


def test_correct_blocks_that_write_in_place_are_silent():
    for mode in ("accumulate", "rebound", "copied", "act_after"):
        assert _run(mode)[1] == [], mode


def test_the_probe_leaves_the_run_as_it_was():
    guarded, plain = _run("bug")[0], _run("bug", guard=False)[0]
    for a, b in zip(guarded.parameters(), plain.parameters()):
        assert torch.equal(a, b)
