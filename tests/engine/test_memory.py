"""Activation checkpointing: same gradients, fewer saved activations."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from overt.engine.memory import apply_activation_checkpointing
from overt.errors import ConfigError


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU()),
                         nn.Linear(256, 10))


def _grads_and_saved(model, x, y):
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return [p.grad.clone() for p in model.parameters()], sum(saved)


def test_checkpointed_block_gives_same_gradients_and_saves_less(digits):
    x, y = digits[0].tensors[0][:64], digits[0].tensors[1][:64]
    plain_grads, plain_saved = _grads_and_saved(_model(), x, y)
    model = _model()
    assert apply_activation_checkpointing(model, ["0"]) == ["0"]
    ckpt_grads, ckpt_saved = _grads_and_saved(model, x, y)
    for a, b in zip(plain_grads, ckpt_grads):
        torch.testing.assert_close(a, b)
    assert ckpt_saved < plain_saved / 2
    assert list(model.state_dict()) == list(_model().state_dict())


def test_class_name_targets_and_unknown_target(digits):
    model = _model()
    assert apply_activation_checkpointing(model, ["GELU"]) == ["0.1", "0.3"]
    with pytest.raises(ConfigError, match="matches no submodule"):
        apply_activation_checkpointing(model, ["nope"])


def test_trainer_option_trains(digits):
    import overt
    from overt.engine.metrics import accuracy

    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    summary = overt.fit(model, opt, nn.CrossEntropyLoss(), digits[0], digits[1], epochs=2, progress="off",
                        activation_checkpointing=["0"], metrics={"accuracy": accuracy})
    assert summary["final"]["val/accuracy"] > 0.85
