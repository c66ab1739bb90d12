"""target-in-inputs (issue 33, data pipelines: leakage): the target handed to the model among its inputs.
Planted bugs (a forecasting window that includes the value it forecasts, a label column left among
tabular features) and their clean twins."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _fit(model, loader, loss, epochs=2):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            getattr(F, loss)(model(xb).squeeze(-1) if loss == "mse_loss" else model(xb), yb).backward()
            opt.step()
    return g.report(), g.session.options.stream.getvalue()


class _Windows(Dataset):
    """Windows of 8 past values of an AR(2) series and the next value; ``leak``: the window's slice
    runs one step too far and includes the value it forecasts."""

    def __init__(self, n, leak):
        g = torch.Generator().manual_seed(1)
        s = torch.zeros(n)
        noise = 0.5 * torch.randn(n, generator=g)
        for t in range(2, n):
            s[t] = 1.6 * s[t - 1] - 0.8 * s[t - 2] + noise[t]
        self.s, self.w, self.leak = s, 8, leak

    def __len__(self):
        return len(self.s) - self.w - 1

    def __getitem__(self, i):
        end = i + self.w + (1 if self.leak else 0)
        return self.s[end - self.w:end], self.s[i + self.w]


@pytest.mark.parametrize("leak", [True, False])
def test_forecasting_window_that_includes_its_target(leak):
    torch.manual_seed(0)
    loader = DataLoader(_Windows(1200, leak), batch_size=64, shuffle=True)
    findings, text = _fit(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)), loader, "mse_loss")
    if leak:
        assert slugs(findings) == ["target-in-inputs"], text
        assert "equals input value 7 of Sequential (of 8 per sample" in text
    else:
        assert findings == [], text


@pytest.mark.parametrize("leak", [True, False])
def test_label_column_left_among_the_features(leak):
    """Digits as a table whose last column is the label: the features are meant to be all but it."""
    torch.manual_seed(0)
    x, y = digits()
    table = torch.cat([x, y[:, None].float()], 1)
    features = table if leak else table[:, :-1]
    loader = DataLoader(TensorDataset(features, y), batch_size=64, shuffle=True)
    width = features.shape[1]
    findings, text = _fit(nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, 10)), loader,
                          "cross_entropy")
    if leak:
        assert slugs(findings) == ["target-in-inputs"], text
        assert "F.cross_entropy" in text and "input value 64" in text
    else:
        assert findings == [], text


def test_autoencoder_and_constant_targets_are_not_judged():
    torch.manual_seed(0)
    x, _ = digits()
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    ones = torch.ones(64)
    for epoch in range(2):
        for xb, in DataLoader(TensorDataset(x), batch_size=64, shuffle=True):
            opt.zero_grad()
            (F.mse_loss(model(xb), xb) + 0.0 * F.mse_loss(model(xb)[:, 0], ones[:len(xb)] * 0)).backward()
            opt.step()
    findings = g.report()
    assert "target-in-inputs" not in slugs(findings), g.session.options.stream.getvalue()


def test_a_copy_task_over_token_ids_is_not_judged():
    # "the class is the first token": the answer is among the inputs by design (copy and recall benchmarks);
    # integer inputs are ids that reach an embedding, so nothing proves a leak (round five's w143 twin)
    g = torch.Generator().manual_seed(1)
    seq = torch.randint(10, (640, 12), generator=g)
    model = nn.Sequential(nn.Embedding(10, 8), nn.Flatten(), nn.Linear(96, 10))
    findings, text = _fit(model, DataLoader(TensorDataset(seq, seq[:, 0]), batch_size=64), "cross_entropy")
    assert "target-in-inputs" not in slugs(findings), text
