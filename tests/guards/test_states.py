"""load-state-dict-no-effect and snapshot-aliases-weights (overt/guards/states.py): planted
bugs and their clean twins, on small real runs."""

from __future__ import annotations

import copy

import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import batches, digits, guarded, mlp, slugs


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = mlp()

    def forward(self, x):
        return self.model(x)


def _train(model, opt, steps=12):
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def test_a_prefixed_state_dict_loaded_with_strict_false_is_named(tmp_path):
    trained = Wrapper()
    torch.save(trained.state_dict(), tmp_path / "ckpt.pt")  # keys 'model.0.weight', ...
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    model.load_state_dict(torch.load(tmp_path / "ckpt.pt", weights_only=True), strict=False)  # the bug: nothing loads
    _train(model, opt)
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert slugs(findings) == ["load-state-dict-no-effect"], text
    assert "loaded 0 of the model's 4 entries (the state dict's keys start with 'model.'" in text
    assert "test_states.py:" in findings[0].where


def test_the_stripped_state_dict_and_a_head_swap_are_silent(tmp_path):
    trained = Wrapper()
    torch.save(trained.state_dict(), tmp_path / "ckpt.pt")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    state = {k.removeprefix("model."): v for k, v in torch.load(tmp_path / "ckpt.pt", weights_only=True).items()}
    model.load_state_dict(state)
    # fine-tuning: the backbone loads, the new head does not (strict=False on purpose)
    head = {k: v for k, v in state.items() if not k.startswith("2.")}
    model.load_state_dict(head, strict=False)
    _train(model, opt)
    assert g.report() == [], g.session.options.stream.getvalue()


def _best_of(model, opt, snapshot, tmp_path):
    g = guarded(model, opt, ignore=TIMING)
    best, best_loss = None, float("inf")
    for epoch in range(3):
        _train(model, opt, steps=8)
        with torch.no_grad():
            x, y = digits()  # held-out digits (random inputs would be outside the training range: train-serve-skew)
            loss = float(nn.functional.cross_entropy(model(x[1600:1664]), y[1600:1664]))
        if best is None or loss < best_loss:
            best, best_loss = snapshot(model), loss
    torch.save(best, tmp_path / "best.pt")
    model.load_state_dict(best)
    return g.report(), g.session.options.stream.getvalue()


def test_a_best_snapshot_that_is_the_live_weights_is_named(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    findings, text = _best_of(model, opt, lambda m: m.state_dict(), tmp_path)  # the bug: no copy
    assert slugs(findings) == ["snapshot-aliases-weights"], text
    assert "restores nothing" in text and "test_states.py:" in text


def test_a_copied_snapshot_is_silent_and_saving_a_fresh_state_dict_too(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    findings, text = _best_of(model, opt, lambda m: copy.deepcopy(m.state_dict()), tmp_path)
    assert findings == [], text
    g = guarded(model, opt, ignore=TIMING)
    _train(model, opt)
    torch.save(model.state_dict(), tmp_path / "last.pt")
    assert g.report() == []


class Tied(nn.Module):
    """Digits through one hidden layer applied twice: ``first`` and ``second`` share their weight (tied)."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(64, 64)
        self.second = nn.Linear(64, 64)
        self.second.weight = self.first.weight
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(torch.tanh(self.second(torch.tanh(self.first(x)))))


def _accuracy(model):
    x, y = digits()
    with torch.no_grad():
        return float((model(x[1500:]).argmax(1) == y[1500:]).float().mean())


def _load_tied(assign: bool, drop: bool = True, untied: bool = False):
    torch.manual_seed(0)
    model = Tied()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    _train(model, opt, steps=100)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if drop:  # saved as safetensors saves shared tensors: under one name
        del state["second.weight"]
    if untied:  # a checkpoint of a model whose two layers were trained apart: both named, different values
        state["second.weight"] = state["first.weight"] * 0.5
    torch.manual_seed(1)  # a fresh model: another draw than the trained model's initial weights
    fresh = Tied()
    fresh.load_state_dict(state, strict=False, assign=assign)
    acc = _accuracy(fresh)
    return g.report(), g.session.options.stream.getvalue(), acc


def test_tied_weights_untied_by_an_assign_load_are_named():
    findings, text, acc = _load_tied(assign=True)
    assert slugs(findings) == ["load-state-dict-no-effect"], text
    assert "first.weight, second.weight were one parameter before the load" in text
    assert "second.weight kept the values it had before the load" in text and "test_states.py:" in findings[0].where
    twin, twin_text, twin_acc = _load_tied(assign=False)  # an in-place copy fills both names
    assert twin == [], twin_text
    assert twin_acc > acc + 0.05, (twin_acc, acc)  # the untied model is half random


def test_an_assign_load_that_names_every_tied_member_is_silent():
    # the state dict names both members: with the same tensor (state_dict() of the tied model) ...
    findings, text, _ = _load_tied(assign=True, drop=False)
    assert findings == [], text
    # ... or with different values (a checkpoint that is untied on purpose: the load does what it says)
    findings, text, _ = _load_tied(assign=True, drop=False, untied=True)
    assert findings == [], text
