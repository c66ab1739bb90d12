"""log-scale-non-negative (overt/guards/scalefloor.py, issue 33, the wild corpus's w403): the log-variance a
reparameterised Gaussian sample exponentiates ranges over all reals.  Planted: a digits VAE whose log-variance goes
through ``softplus`` (wohlert/semi-supervised-pytorch#16), and one whose log standard deviation goes through
``relu`` before ``Normal(...).rsample()``.  Silent near the premise: the log-variance straight from the layer (the
twin), ``softplus`` applied to the standard deviation itself, a chosen floor below 1 (``exp(softplus(s) - 5)``),
and data (not noise) multiplied by ``exp(softplus(s))``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal, kl_divergence

from overt.guards.scalefloor import scale_floor
from tests.guards.helpers import batches, guarded_run

SLUG = "log-scale-non-negative"


class VAE(nn.Module):
    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu, h = self.enc(x).chunk(2, -1)
        if self.mode == "normal-relu":  # a log standard deviation through relu, sampled by rsample
            q = Normal(mu, F.relu(h).exp())
            z = q.rsample()
            kl = kl_divergence(q, Normal(0.0, 1.0)).sum(-1)
        elif self.mode == "std-softplus":  # softplus on the standard deviation itself: correct
            q = Normal(mu, F.softplus(h) + 1e-4)
            z = q.rsample()
            kl = kl_divergence(q, Normal(0.0, 1.0)).sum(-1)
        else:
            if self.mode == "softplus":
                log_var = F.softplus(h)
            elif self.mode == "floor":  # a chosen minimum spread, exp(-2.5), not a floor at 1
                log_var = F.softplus(h) - 5.0
            else:
                log_var = h
            z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
            kl = -0.5 * (1 + log_var - mu ** 2 - log_var.exp()).sum(-1)
        if self.mode == "flow":  # data, not noise, scaled by exp(softplus(.)): no Gaussian sample
            z = z + x[:, :8] * torch.exp(F.softplus(h))
        recon = F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="none").sum(-1)
        return (recon + kl).mean()


def _run(mode: str) -> list:
    def train():
        torch.manual_seed(0)
        model = VAE(mode)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, _ in batches(64, 12):
            opt.zero_grad()
            model(xb).backward()
            opt.step()

    return [f for f in guarded_run(train)[0] if f.slug == SLUG]


def test_a_log_variance_through_softplus_is_named_at_the_draw():
    findings = _run("softplus")
    assert len(findings) == 1, findings
    f = findings[0]
    assert "comes out of softplus" in f.message and "at least 1" in f.message
    assert "test_scalefloor.py:" in f.where and "no softplus" in f.fix


def test_a_log_std_through_relu_in_rsample_is_named():
    findings = _run("normal-relu")
    assert len(findings) == 1, findings
    assert "comes out of relu" in findings[0].message


def test_silent_on_the_twin_a_positive_std_a_chosen_floor_and_scaled_data():
    for mode in ("plain", "std-softplus", "floor", "flow"):
        assert _run(mode) == [], mode


def test_the_floor_is_read_through_the_chain():
    h = torch.randn(4, 3, requires_grad=True)
    assert scale_floor((0.5 * F.softplus(h)).exp().grad_fn) == (1.0, "softplus")
    assert scale_floor(torch.exp(F.relu(h) / 2).sqrt().grad_fn) == (1.0, "relu")
    assert scale_floor(torch.exp(h.pow(2)).pow(0.5).grad_fn) == (1.0, "an even power")
    assert scale_floor(torch.exp(0.5 * h.clamp(min=0)).grad_fn) == (1.0, "clamp(min=0)")
    assert scale_floor(torch.exp(0.5 * h.clamp(min=-8.0)).grad_fn) is None  # a floor on the log-scale below 0
    assert scale_floor(torch.exp(0.5 * h).grad_fn) is None  # a free log-scale
    assert scale_floor(torch.exp(F.softplus(h) - 1.0).grad_fn) is None  # a shift autograd does not keep
    assert scale_floor(F.softplus(h).grad_fn) is None  # a positive scale without exp
    assert scale_floor(torch.exp(-0.5 * F.softplus(h)).grad_fn) is None  # decreasing: a ceiling, not a floor


# -- sample-spread-unpriced: the same module's second premise -------------------------------------------------------
UNPRICED = "sample-spread-unpriced"


class Encoder(nn.Module):
    def __init__(self, leaf: bool = False):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))
        self.log_std = nn.Parameter(torch.zeros(8)) if leaf else None
        self.critic = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor):
        mu, log_var = self.enc(x).chunk(2, -1)
        if self.log_std is not None:  # a learned parameter, not an encoder's output
            z = mu + torch.randn_like(mu) * self.log_std.exp()
        else:
            z = mu + torch.randn_like(mu) * (0.5 * log_var).exp()
        recon = F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="none").sum(-1).mean()
        kl = -0.5 * (1 + log_var - mu ** 2 - log_var.exp()).sum(-1).mean()
        return recon, kl, mu, log_var, z


def _run_unpriced(mode: str) -> list:
    def train():
        torch.manual_seed(0)
        model = Encoder(leaf=mode == "leaf")
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, _ in batches(64, 12):
            opt.zero_grad()
            recon, kl, mu, log_var, z = model(xb)
            if mode == "separate":  # the KL backwarded on its own: the whole loss is not one graph
                recon.backward(retain_graph=True)
                kl.backward()
            elif mode == "log_prob":  # a Monte Carlo KL: log q(z) - log p(z) reads the scale
                q = Normal(mu, (0.5 * log_var).exp())
                (recon + (q.log_prob(z) - Normal(0.0, 1.0).log_prob(z)).sum(-1).mean()).backward()
            elif mode in ("nokl", "leaf"):
                recon.backward()
            elif mode == "adversarial":  # an adversarial autoencoder: a critic on the codes prices their spread
                fooled = F.binary_cross_entropy_with_logits(model.critic(z), torch.ones(len(z), 1))
                (recon + fooled).backward()
            else:
                (recon + 0.1 * kl).backward()
            opt.step()

    return [f for f in guarded_run(train)[0] if f.slug == UNPRICED]


def test_a_vae_without_its_kl_term_is_named_at_the_draw():
    findings = _run_unpriced("nokl")
    assert len(findings) == 1, findings
    f = findings[0]
    assert "the rest of the loss never reads" in f.message and "test_scalefloor.py:" in f.where
    assert "KL" in f.fix


def test_silent_with_a_kl_a_log_density_a_separate_backward_a_leaf_scale_or_a_critic_on_the_codes():
    for mode in ("kl", "log_prob", "separate", "leaf", "adversarial"):
        assert _run_unpriced(mode) == [], mode
