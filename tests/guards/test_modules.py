"""Modules and tensors at the model boundary."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from .helpers import batches, guarded, mlp, slugs, train


class _ListNet(nn.Module):
    def __init__(self, registered: bool):
        super().__init__()
        torch.manual_seed(0)
        blocks = [nn.Linear(64, 32), nn.Linear(32, 32)]
        self.blocks = nn.ModuleList(blocks) if registered else blocks
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


def test_unregistered_submodule():
    model = _ListNet(registered=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=3)
    findings = g.report()
    assert slugs(findings) == ["unregistered-submodule"]
    f = findings[0]
    assert "_ListNet.blocks" in f.where and "test_modules.py" in f.where
    assert "nn.ModuleList" in f.message


def test_module_list_is_quiet():
    model = _ListNet(registered=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    assert g.report() == []


class _AddedListNet(nn.Module):
    """Layers kept in a plain list *and* registered one by one with add_module (as pyGAT's attention
    heads): parameters(), .to() and state_dict() see them.  ``skip``: one left out of add_module."""

    def __init__(self, skip: bool):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = [nn.Linear(64, 32), nn.Linear(32, 32)]
        for i, block in enumerate(self.blocks[:1] if skip else self.blocks):
            self.add_module(f"block_{i}", block)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


def test_a_list_of_layers_each_registered_with_add_module_is_not_unregistered_submodule():
    # pyGAT (fresh2, session 47): `self.attentions = [...]` then add_module per head: registered
    model = _AddedListNet(skip=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    assert "unregistered-submodule" not in slugs(g.report())
    # the buggy twin: the second layer is in the list only, invisible to parameters()
    model = _AddedListNet(skip=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=3)
    f = next(f for f in g.report() if f.slug == "unregistered-submodule")
    assert "_AddedListNet.blocks" in f.where and "1 module(s)" in f.message


def test_device_mismatch_is_named_before_pytorchs_error():
    model = mlp().to("meta")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    xb, yb = next(batches())
    with pytest.raises(RuntimeError):
        model(xb)
    findings = g.report()
    assert slugs(findings) == ["device-mismatch"]
    assert "input 0 of Sequential is on cpu but its parameters are on meta" in findings[0].message
    assert "test_modules.py" in findings[0].where


def test_targets_on_another_device_at_the_loss():
    logits = torch.randn(4, 10, requires_grad=True)
    model = mlp()
    g = guarded(model, None)
    with pytest.raises(Exception):
        F.cross_entropy(logits, torch.zeros(4, dtype=torch.long, device="meta"))
    assert slugs(g.report()) == ["device-mismatch"]


def test_dtype_mismatch_float64_data():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    xb, yb = next(batches())
    with pytest.raises(RuntimeError):
        F.cross_entropy(model(xb.double()), yb)
    findings = g.report()
    assert slugs(findings) == ["dtype-mismatch"]
    assert "torch.float64" in findings[0].message and "torch.float32" in findings[0].message


def test_dtype_mismatch_integer_features():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    xb, yb = next(batches())
    with pytest.raises(RuntimeError):
        model((xb * 16).long())
    assert slugs(g.report()) == ["dtype-mismatch"]


class _Casting(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        return self.net(x.float())  # handles its own conversion


def test_model_that_converts_its_inputs_is_quiet():
    model = _Casting()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    for xb, yb in batches(32, 6):
        opt.zero_grad()
        F.cross_entropy(model(xb.double()), yb).backward()
        opt.step()
    assert g.report() == []
