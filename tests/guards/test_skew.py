"""train-serve-skew at evaluation time during training (overt/guards/skew.py): inputs
standardised for training but not for evaluation; the twin prepares both alike."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs


@pytest.mark.parametrize("same", [False, True])
def test_evaluation_inputs_prepared_unlike_training_are_named(same):
    torch.manual_seed(0)
    x, y = digits()
    mean, std = x[:1400].mean(0), x[:1400].std(0) + 1e-3
    train = DataLoader(TensorDataset((x[:1400] - mean) / std, y[:1400]), batch_size=64, shuffle=True)
    val_x = (x[1400:] - mean) / std if same else x[1400:]  # the bug: raw pixels in evaluation
    val = DataLoader(TensorDataset(val_x, y[1400:]), batch_size=128)
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(2):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for xb, yb in val:
                model(xb)
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert slugs(findings) == ([] if same else ["train-serve-skew"]), text
    if not same:
        assert "evaluation inputs of Sequential are not prepared like its training inputs" in text
