"""val-overlaps-train on tensors (overt/guards/evalrows.py, issue 33): a feature cache keyed without the split
(Yale-LILY/DYLE#1) hands evaluation the training rows in another tensor.  Silent: a held-out split, training
accuracy on the training tensor itself, training accuracy on a copy beside a held-out evaluation, augmented
training rows.  Small real runs on digits, found as ``overt run`` finds them."""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, slugs


def _run(evaluate: str, eval_mode: bool = False, noise: bool = False) -> list:
    x, y = digits()
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    tr, va = perm[:300], perm[300:1000]
    cache: dict[str, tuple] = {}

    def load(split: str, keyed: bool):
        key = split if keyed else "features"
        if key not in cache:
            idx = tr if split == "train" else va
            cache[key] = (x[idx].clone(), y[idx].clone())
        return tuple(t.clone() for t in cache[key])  # read back from the cache: a new tensor

    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x_tr, y_tr = load("train", keyed=evaluate != "cache-bug")
        for step in range(60):
            inp = x_tr + 0.05 * torch.randn_like(x_tr) if noise else x_tr
            loss = F.cross_entropy(model(inp), y_tr)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if eval_mode:
            model.eval()
        accs = []
        with torch.no_grad():
            if evaluate in ("cache-bug", "cache"):
                x_va, y_va = load("validation", keyed=evaluate != "cache-bug")
                accs.append((model(x_va).argmax(1) == y_va).float().mean().item())
            if evaluate in ("train-tensor",):
                accs.append((model(x_tr).argmax(1) == y_tr).float().mean().item())
            if evaluate == "train-copy-and-val":
                accs.append((model(x[tr]).argmax(1) == y[tr]).float().mean().item())
                accs.append((model(x[va]).argmax(1) == y[va]).float().mean().item())
    finally:
        findings = session.close()
    assert all(0.0 <= a <= 1.0 for a in accs)
    return findings


def test_validation_features_that_are_the_training_features_are_named():
    findings = _run("cache-bug")
    assert slugs(findings) == ["val-overlaps-train"]
    assert "300 of 300 rows (100%)" in findings[0].message
    assert "test_evalrows.py:" in findings[0].where
    assert "val-overlaps-train" in slugs(_run("cache-bug", eval_mode=True))


def test_a_held_out_split_is_silent():
    assert "val-overlaps-train" not in slugs(_run("cache"))
    assert "val-overlaps-train" not in slugs(_run("cache", eval_mode=True))


def test_training_accuracy_on_the_training_tensor_is_silent():
    assert "val-overlaps-train" not in slugs(_run("train-tensor"))


def test_training_accuracy_on_a_copy_beside_a_held_out_evaluation_is_silent():
    assert "val-overlaps-train" not in slugs(_run("train-copy-and-val", eval_mode=True))


def test_noisy_training_inputs_are_silent():
    assert "val-overlaps-train" not in slugs(_run("cache-bug", noise=True))


class WithWeights(nn.Module):
    """Rows and a per-row weight: a second tensor argument (as node features beside a graph)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x, w):
        return self.net(x) * w[:, None]


def _run_parts(two_args: bool) -> list:
    """Transductive: every row is a training input, the loss reads half of them; evaluation scores copies of
    the other rows in batches of 40."""
    x, y = digits()
    x, y = x[:300], y[:300]
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        model = WithWeights() if two_args else nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        w = torch.ones(300)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for step in range(60):
            out = model(x, w) if two_args else model(x)
            loss = F.cross_entropy(out[:150], y[:150])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for i in range(150, 300, 40 if not two_args else 150):
                xb = x[i:i + (40 if not two_args else 150)].clone()
                out = model(xb, torch.ones(len(xb))) if two_args else model(xb)
    finally:
        findings = session.close()
    assert out.shape[1] == 10
    return findings


def test_inputs_trained_as_a_whole_and_scored_in_parts_are_silent():
    assert "val-overlaps-train" not in slugs(_run_parts(two_args=True))
    assert "val-overlaps-train" not in slugs(_run_parts(two_args=False))
