"""frozen-params-moved (overt/guards/frozenmoves.py, issue 33): parameters meant to stay frozen that
the optimizer step still moves.  Two forms of the freeze (requires_grad=False with a gradient tensor
left on the parameter; gradient elements zeroed after backward), two movers (weight decay, momentum
built before the freeze), on small real runs on digits, as ``overt run`` finds them (PyTorch's global
hooks).  The wild case w100 (textual inversion: embedding rows "frozen" by zeroing their gradients,
decayed by AdamW) is a third form."""

from __future__ import annotations

import io

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, mlp, slugs


def _session() -> GuardSession:
    return GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=5), auto=True)


def _loader() -> DataLoader:
    x, y = digits()
    return DataLoader(TensorDataset(x[:1280], y[:1280]), batch_size=64, shuffle=True,
                      generator=torch.Generator().manual_seed(0))


def _freeze_backbone_midway(fix: str | None) -> list:
    """Fine-tune: the first epoch trains everything, then the first layer is frozen with
    requires_grad_(False) while the loop keeps zero_grad(set_to_none=False) (fairseq#4702,
    S-Prompts#2: frozen parameters still updated)."""
    session = _session()
    try:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        for epoch in range(4):
            if epoch == 1:
                model[0].requires_grad_(False)
                if fix == "rebuild":  # the optimizer made again from the trainable parameters
                    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1,
                                          momentum=0.9, weight_decay=1e-3)
            for xb, yb in _loader():
                opt.zero_grad(set_to_none=fix == "none")
                nn.functional.cross_entropy(model(xb), yb).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                opt.step()
    finally:
        findings = session.close()
    return findings


def test_a_frozen_layer_that_keeps_a_zero_gradient_is_still_moved():
    findings = _freeze_backbone_midway(fix=None)
    assert slugs(findings) == ["frozen-params-moved"]
    message = findings[0].message
    assert "requires_grad=False" in message and "weight_decay=0.001" in message and "momentum_buffer" in message
    assert "test_frozen_moves.py" in findings[0].where


def test_a_frozen_layer_the_optimizer_skips_is_quiet():
    assert _freeze_backbone_midway(fix="none") == []  # zero_grad(set_to_none=True): grad None, skipped
    assert _freeze_backbone_midway(fix="rebuild") == []


def _prune_midway(fix: str | None) -> list:
    """Magnitude pruning: after the first epoch half of the first layer's weights are set to zero
    and their gradients masked after every backward, while SGD's momentum from before pruning keeps
    moving them (the pruned weights grow back)."""
    session = _session()
    try:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        weight = model[0].weight
        mask = None
        for epoch in range(5):
            if epoch == 1:
                with torch.no_grad():
                    mask = weight.abs() > weight.abs().median()
                    weight.mul_(mask)
                    if fix == "reset":  # the momentum of the pruned weights cleared with them
                        opt.state[weight]["momentum_buffer"].mul_(mask)
            for xb, yb in _loader():
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                if mask is not None:
                    weight.grad.mul_(mask)
                opt.step()
                if mask is not None and fix == "reapply":  # the mask applied to the weights after each step
                    with torch.no_grad():
                        weight.mul_(mask)
    finally:
        findings = session.close()
    return findings


def test_pruned_weights_moved_by_momentum_are_named():
    findings = _prune_midway(fix=None)
    assert slugs(findings) == ["frozen-params-moved"]
    message = findings[0].message
    assert "gradient set to zero after backward" in message and "momentum_buffer" in message
    assert "weight decay of its param group" not in message


def test_pruned_weights_kept_at_zero_are_quiet():
    assert _prune_midway(fix="reapply") == []
    assert _prune_midway(fix="reset") == []


def test_rows_backward_leaves_at_zero_are_not_a_freeze():
    """An embedding whose unused rows get a zero gradient from backward itself (no one zeroed
    them): AdamW decays them, as it decays every weight; nothing says they were meant to stay."""
    session = _session()
    try:
        torch.manual_seed(0)
        emb = nn.EmbeddingBag(40, 8)
        head = nn.Linear(8, 4)
        model = nn.Sequential(emb, head)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        g = torch.Generator().manual_seed(0)
        for _ in range(60):
            tokens = torch.randint(20, (32, 6), generator=g)  # rows 20-39 are never used
            labels = tokens[:, 0] % 4
            opt.zero_grad()
            nn.functional.cross_entropy(model(tokens), labels).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    finally:
        findings = session.close()
    assert findings == []


def test_gradients_set_by_hand_on_parameters_without_autograd_are_quiet():
    """Evolution strategies: the parameters need no autograd (requires_grad=False) and the gradient
    estimate is written into .grad by hand for the optimizer to apply, on purpose."""
    x, y = digits()
    session = _session()
    try:
        model = mlp()
        model.requires_grad_(False)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        g = torch.Generator().manual_seed(0)
        for _ in range(12):
            base = nn.functional.cross_entropy(model(x[:256]), y[:256])
            for p in model.parameters():
                noise = torch.randn(p.shape, generator=g)
                with torch.no_grad():
                    p.add_(noise, alpha=1e-2)
                    gain = nn.functional.cross_entropy(model(x[:256]), y[:256]) - base
                    p.sub_(noise, alpha=1e-2)
                p.grad = noise * gain / 1e-2  # the estimate, set by hand
            opt.step()
    finally:
        findings = session.close()
    assert findings == []
