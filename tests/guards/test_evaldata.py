"""eval-inputs-augmented (overt/guards/evaldata.py): a random transform reaching the evaluation
data through the dataset random_split's subsets share; the twin gives evaluation its own."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset, random_split

from tests.conftest import TIMING
from tests.guards.helpers import Digits, guarded, mlp, noise, slugs


@pytest.mark.parametrize("shared", [True, False])
def test_augmented_evaluation_data_is_named_and_its_twin_is_silent(shared):
    torch.manual_seed(0)
    full = Digits()
    train_set, val_set = random_split(full, [1400, len(full) - 1400], generator=torch.Generator().manual_seed(0))
    if shared:
        full.transform = noise  # the bug: the subsets share the dataset, and its transform
    else:
        train_set = Subset(Digits(transform=noise), train_set.indices)
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(2):
        model.train()
        for xb, yb in DataLoader(train_set, batch_size=64, shuffle=True):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for xb, yb in DataLoader(val_set, batch_size=128):
                model(xb)
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert slugs(findings) == (["eval-inputs-augmented"] if shared else []), text
