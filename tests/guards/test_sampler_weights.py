"""sampler-weights-short (issue 33, round three's w80): a WeightedRandomSampler given one weight per
class instead of one per sample.  Planted bugs and their clean twins on digits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset, WeightedRandomSampler

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _train(loader):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("per_class", [True, False])
def test_class_weights_given_to_a_weighted_sampler(per_class):
    x, y = digits()
    x, y = x[:600], y[:600]
    class_weights = 1.0 / torch.bincount(y, minlength=10).float()
    weights = class_weights if per_class else class_weights[y]
    ds = TensorDataset(x, y)
    loader = DataLoader(ds, batch_size=32, sampler=WeightedRandomSampler(weights, len(ds), replacement=True))
    findings, text = _train(loader)
    if per_class:
        assert slugs(findings) == ["sampler-weights-short"], text
        assert "holds 10 weights for a TensorDataset of 600 samples" in text
        assert "test_sampler_weights.py:" in text  # the loop that iterates the loader
    else:
        assert findings == [], text


class _Rows(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


@pytest.mark.parametrize("short", [True, False])
def test_numpy_weights_of_another_split_over_a_map_dataset(short):
    """Another form: numpy weights computed on a smaller split (the validation labels) and a map-style
    Dataset of the training split."""
    x, y = digits()
    train = _Rows(x[:800], y[:800])
    labels = y[800:1000].numpy() if short else y[:800].numpy()
    weights = (1.0 / np.bincount(labels, minlength=10))[labels]
    loader = DataLoader(train, batch_size=32, sampler=WeightedRandomSampler(weights, 800))
    findings, text = _train(loader)
    assert slugs(findings) == (["sampler-weights-short"] if short else []), text
