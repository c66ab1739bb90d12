"""residual-skip-missing (overt/guards/residualskip.py, issue 33, the wild corpus's w363): a block named residual
returns its input when its branch's weights are off.  Planted: a residual MLP on digits whose blocks return the branch
alone (UGATIT-pytorch#32) and one that adds the branch to itself; its twin returns ``out + x``.  Silent near the
premise: a post-norm block (``norm(x + branch)``), an activation after the sum, a projection shortcut, a block not
named residual."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run

SLUG = "residual-skip-missing"
D = 64


class ResBlock(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.fc1, self.norm1 = nn.Linear(D, D), nn.LayerNorm(D)
        self.fc2, self.norm2 = nn.Linear(D, D), nn.LayerNorm(D)
        if mode == "projection":
            self.shortcut = nn.Linear(D, D)

    def forward(self, x):
        out = self.norm2(self.fc2(torch.relu(self.norm1(self.fc1(x)))))
        if self.mode == "branch":
            return out
        if self.mode == "doubled":
            return out + out
        if self.mode == "post_norm":
            return self.norm2(x + self.fc2(torch.relu(self.fc1(x))))
        if self.mode == "act_after":
            return F.relu(out + x)
        if self.mode == "projection":
            return out + self.shortcut(x)
        return out + x


class PlainBlock(ResBlock):
    pass


def _run(block, n=3):
    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, D), *[block() for _ in range(n)], nn.ReLU(), nn.Linear(D, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, yb in batches(64, 12):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()

    return [f for f in guarded_run(train)[0] if f.slug == SLUG]


def test_a_residual_block_that_returns_its_branch_alone_is_named_at_its_forward():
    findings = _run(lambda: ResBlock("branch"))
    assert len(findings) == 1, findings  # once per class
    f = findings[0]
    assert "Sequential.1 (ResBlock) is named a residual block, but its output does not carry its input" in f.message
    assert f.where.startswith("ResBlock.forward at ") and "test_residualskip.py:" in f.where
    assert f.fix and f.severity == "warning"


def test_a_branch_added_to_itself_is_named():
    assert len(_run(lambda: ResBlock("doubled"))) == 1


def test_residual_blocks_of_every_form_stay_silent():
    for mode in ("skip", "post_norm", "act_after", "projection"):
        assert _run(lambda: ResBlock(mode)) == [], mode


def test_a_block_not_named_residual_is_not_judged():
    class Plain(ResBlock):
        pass
    assert _run(lambda: Plain("branch")) == []


class InplaceResBlock(nn.Module):
    """vq-vae-2's ResBlock: the branch opens with an in-place ReLU, which writes into the block's input."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(D, D), nn.ReLU(inplace=True), nn.Linear(D, D))

    def forward(self, x):
        out = self.conv(x)
        out += x
        return out


def test_the_probe_never_writes_into_the_users_tensors():
    """The probe runs the block again: on a copy of its input, so the in-place ReLU does not bump the version of a
    tensor the user's graph saved (before, the user's backward raised 'modified by an inplace operation' under the
    guards only: w420)."""
    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, D), InplaceResBlock(), InplaceResBlock(), nn.Linear(D, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, yb in batches(64, 12):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()

    findings, text = guarded_run(train)  # raised RuntimeError in backward() before
    # the weights-off premise holds (the block returns the rectified input); the block is named by skipwrite.py's
    # premise instead, for the skip that adds its overwritten input (session 55)
    assert [f for f in findings if f.slug == SLUG and "not the input it was given" not in f.message] == [], text
