"""overt.testing: each helper passes on a clean recipe and fails, explaining why, on a planted bug."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from overt import testing
from overt.recipes.tiny import make_points


def objects():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    return model, torch.optim.Adam(model.parameters(), lr=0.02), nn.CrossEntropyLoss(), make_points(64, 0.1, 0)


def test_a_clean_recipe_passes_all_four():
    losses = testing.assert_loss_decreases("tiny")
    assert len(losses) == 30 and losses[-1] < losses[0]
    assert testing.assert_overfits_batch("tiny").passed
    assert testing.assert_deterministic("tiny", steps=3).passed
    assert testing.assert_checkpoint_roundtrip("tiny").passed


def test_clean_objects_pass():
    model, opt, loss, data = objects()
    testing.assert_loss_decreases(model, opt, loss, data, batch_size=8)
    testing.assert_overfits_batch(model, opt, loss, data)
    testing.assert_checkpoint_roundtrip(model, opt, loss, data)
    assert model[0].weight.grad is None  # copies were trained, never the user's objects


def test_loss_decreases_fails_when_the_optimizer_holds_other_parameters():
    model, _, loss, data = objects()
    stray = torch.optim.Adam(nn.Linear(4, 2).parameters(), lr=0.02)  # planted: params-not-optimized
    with pytest.raises(AssertionError, match="did not decrease") as err:
        testing.assert_loss_decreases(model, stray, loss, data, batch_size=8)
    assert "params-not-optimized" in str(err.value)


def test_overfit_fails_on_softmax_before_cross_entropy():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2), nn.Softmax(dim=-1))  # planted
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    with pytest.raises(AssertionError, match="cannot overfit one batch") as err:
        testing.assert_overfits_batch(model, opt, nn.CrossEntropyLoss(), make_points(64, 0.1, 0), steps=150)
    assert "fix:" in str(err.value)


class NoisyPoints(Dataset):
    """Planted: augmentation noise from a generator overt cannot seed."""

    def __init__(self):
        self.base = make_points(64, 0.1, 0)
        self.rng = np.random.default_rng()

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        return x + torch.from_numpy(self.rng.normal(size=4).astype(np.float32)), y


def test_deterministic_fails_on_an_unseeded_generator():
    model, opt, loss, _ = objects()
    with pytest.raises(AssertionError, match="same seed differ"):
        testing.assert_deterministic(model, opt, loss, NoisyPoints(), batch_size=8, steps=3)


class ListModel(nn.Module):
    """Planted: the layer lives in a plain list, so state_dict() (and every checkpoint) misses it."""

    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 2)]  # overt: ignore[unregistered-submodule] (planted)
        self.scale = nn.Parameter(torch.ones(2))

    def forward(self, x):
        return self.layers[0](x) * self.scale


def test_checkpoint_roundtrip_fails_on_an_unregistered_layer():
    torch.manual_seed(0)
    model = ListModel()
    opt = torch.optim.SGD([*model.parameters(), *model.layers[0].parameters()], lr=0.1)
    with pytest.raises(AssertionError, match="does not restore") as err:
        testing.assert_checkpoint_roundtrip(model, opt, nn.CrossEntropyLoss(), make_points(16, 0.1, 0))
    assert "register" in str(err.value)


def test_a_model_without_its_other_objects_is_a_clear_error():
    with pytest.raises(TypeError, match="optimizer, loss_fn, data"):
        testing.assert_loss_decreases(nn.Linear(4, 2))
