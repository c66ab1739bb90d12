"""regression-target-is-input (overt/guards/targetcopy.py, issue 33): a regression whose target is the
model's own input, learned as a copy, is named in the forms it is written (a diffusion noise predictor
regressed with ``F.mse_loss`` on its noisy input, a residual denoiser with ``nn.L1Loss`` on its noisy
digits, a forecaster given its window and the weekday with ``nn.MSELoss`` on a copy of its input window); their
twins (the noise, the clean digits, the next window) and an autoencoder that reconstructs its input
through a bottleneck stay quiet.
Small real runs, found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit, slugs

SLUG = "regression-target-is-input"


class _Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 2))

    def forward(self, x, t):
        return self.net(torch.cat([x, t[:, None].float() / 20], 1))


def _diffusion(bug: bool) -> list:
    torch.manual_seed(0)
    abar = torch.cumprod(1 - torch.linspace(1e-4, 0.2, 20), 0)
    centres = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])
    model = _Denoiser()

    def losses():
        for _ in range(300):
            x0 = centres[torch.randint(4, (128,))] + 0.15 * torch.randn(128, 2)
            t = torch.randint(20, (128,))
            noise = torch.randn_like(x0)
            x_t = abar[t].sqrt()[:, None] * x0 + (1 - abar[t]).sqrt()[:, None] * noise
            yield F.mse_loss(model(x_t, t), x_t if bug else noise)

    return guarded_fit(model.parameters(), losses(), lr=2e-3)


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x):
        return x + self.f(x)


def _denoiser(bug: bool) -> list:
    torch.manual_seed(0)
    model = _Residual()
    loss_fn = nn.L1Loss()

    def losses():
        for xb, _ in batches(64, 200):
            noisy = xb + 0.2 * torch.randn_like(xb)
            yield loss_fn(model(noisy), noisy if bug else xb)

    return guarded_fit(model.parameters(), losses())


class _Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16 + 7, 64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, window, weekday):
        return self.net(torch.cat([window, weekday], 1))


def _forecaster(bug: bool) -> list:
    torch.manual_seed(0)
    steps = torch.arange(4000, dtype=torch.float32)
    series = torch.sin(steps / 7) + 0.5 * torch.sin(steps / 23) + 0.05 * torch.randn(4000)
    model = _Forecaster()
    loss_fn = nn.MSELoss()

    def losses():
        for _ in range(200):
            start = torch.randint(0, 4000 - 17, (64,))
            idx = start[:, None] + torch.arange(16)
            window, following = series[idx], series[idx + 1]
            weekday = F.one_hot(start % 7, 7).float()
            yield loss_fn(model(window, weekday), window.clone() if bug else following)  # a copy of the input

    return guarded_fit(model.parameters(), losses(), lr=2e-3)


RUNS = {"diffusion": _diffusion, "denoiser": _denoiser, "forecaster": _forecaster}


@pytest.mark.parametrize("form", sorted(RUNS))
def test_target_that_is_the_models_input_is_named(form):
    found = [f for f in RUNS[form](True) if f.slug == SLUG]
    assert len(found) == 1, found
    assert "test_targetcopy.py" in found[0].where and "copy its input" in found[0].message


@pytest.mark.parametrize("form", sorted(RUNS))
def test_target_the_model_must_work_out_is_quiet(form):
    assert SLUG not in slugs(RUNS[form](False))


def test_autoencoder_through_a_bottleneck_is_quiet():
    """An autoencoder's target is its input too; through 8 units it cannot copy the digits."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8), nn.ReLU(), nn.Linear(8, 32), nn.ReLU(),
                          nn.Linear(32, 64))
    findings = guarded_fit(model.parameters(), (F.mse_loss(model(xb), xb) for xb, _ in batches(64, 300)), lr=3e-3)
    assert SLUG not in slugs(findings)
