"""sample-not-reparameterised (overt/guards/samplegrad.py, issue 33, the wild corpus's w366): a draw fed to a trained
layer from a distribution whose parameters are trained carries the gradient (rsample).  Planted: a digits VAE that
draws its latent with ``Normal.sample()`` (pyro-ppl/pyro#1896); its twin with ``rsample()``.  Silent near the
premise: REINFORCE (``log_prob`` of a ``sample()``), noise drawn from a fixed distribution, a draw under
``no_grad``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal, kl_divergence

from tests.guards.helpers import batches, guarded_run

SLUG = "sample-not-reparameterised"


class VAE(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x):
        mu, log_sigma = self.enc(x).chunk(2, -1)
        q = Normal(mu, log_sigma.exp())
        if self.mode == "sample":
            z = q.sample()
        elif self.mode == "noise":  # a fixed distribution's noise added to the reparameterised mean
            z = mu + Normal(0.0, 1.0).sample(mu.shape) * log_sigma.exp()
        else:
            z = q.rsample()
        kl = kl_divergence(q, Normal(0.0, 1.0)).sum(-1)
        recon = F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="none").sum(-1)
        return (recon + kl).mean()


def _run(mode):
    def train():
        torch.manual_seed(0)
        model = VAE(mode)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for xb, _ in batches(64, 12):
            opt.zero_grad()
            model(xb).backward()
            opt.step()

    return [f for f in guarded_run(train)[0] if f.slug == SLUG]


def test_a_latent_drawn_by_sample_and_decoded_is_named_at_the_draw():
    findings = _run("sample")
    assert len(findings) == 1, findings
    f = findings[0]
    assert "a value drawn by Normal.sample()" in f.message and "VAE.dec (Sequential)" in f.message
    assert "(loc, scale)" in f.message and "test_samplegrad.py:" in f.where
    assert "rsample()" in f.fix and f.severity == "error"


def test_rsample_and_fixed_noise_stay_silent():
    assert _run("rsample") == []
    assert _run("noise") == []


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 4))
        self.critic = nn.Linear(64 + 2, 1)


def test_reinforce_with_log_prob_of_the_draw_stays_silent():
    def train():
        torch.manual_seed(0)
        policy = Policy()
        opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
        for xb, _ in batches(32, 12):
            mean, log_std = policy.body(xb).chunk(2, -1)
            pi = Normal(mean, log_std.exp())
            a = pi.sample()
            reward = -(a - 0.5).pow(2).sum(-1)
            value = policy.critic(torch.cat([xb, a], 1)).squeeze(1)
            loss = -(pi.log_prob(a).sum(-1) * (reward - value.detach())).mean() + F.mse_loss(value, reward)
            opt.zero_grad()
            loss.backward()
            opt.step()

    assert [f for f in guarded_run(train)[0] if f.slug == SLUG] == []
