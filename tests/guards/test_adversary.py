"""generator-agrees-with-critic (overt/guards/adversary.py, issue 33): a generator whose loss pushes
the critic's scores of its samples the way the critic's own loss does is named, in the forms a GAN is
written (WGAN with backward(one), a BCE generator loss with the fake label, a least-squares generator
loss with the fake target); correct WGAN, non-saturating, least-squares and hinge GANs, a generator
batch reused for both phases, and a pipeline of two models trained on one loss stay quiet.  Small
real adversarial runs on a 2-D mixture, found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import slugs

CENTRES = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])


def _data(n: int) -> torch.Tensor:
    return CENTRES[torch.randint(4, (n,))] + 0.2 * torch.randn(n, 2)


def _gan(loss: str, buggy: bool, steps: int = 160) -> list:
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=20), auto=True)
    try:
        gen = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.999))
        one, mone = torch.tensor(1.0), torch.tensor(-1.0)
        for _ in range(steps):
            real = _data(64)
            fake = gen(torch.randn(64, 4))
            opt_d.zero_grad()
            if loss == "wgan":  # backward with a gradient argument, as pytorch-wgan writes it
                critic(real).mean().backward(mone)
                critic(fake.detach()).mean().backward(one)
            elif loss == "hinge":
                (F.relu(1 - critic(real)).mean() + F.relu(1 + critic(fake.detach())).mean()).backward()
            elif loss == "bce":
                d_real, d_fake = critic(real), critic(fake.detach())
                (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
                 + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))).backward()
            else:  # least squares
                (F.mse_loss(critic(real), torch.ones(64, 1))
                 + F.mse_loss(critic(fake.detach()), torch.zeros(64, 1))).backward()
            opt_d.step()
            opt_g.zero_grad()
            scores = critic(fake)  # the same generated batch, now attached
            if loss in ("wgan", "hinge"):
                g_loss = scores.mean() if buggy else -scores.mean()
            elif loss == "bce":
                label = torch.zeros_like(scores) if buggy else torch.ones_like(scores)
                g_loss = F.binary_cross_entropy_with_logits(scores, label)
            else:
                g_loss = F.mse_loss(scores, torch.full((64, 1), 0.0 if buggy else 1.0))
            g_loss.backward()
            opt_g.step()
    finally:
        findings = session.close()
    return findings


@pytest.mark.parametrize("loss", ["wgan", "bce", "lsgan"])
def test_a_generator_trained_the_critics_way_is_named(loss):
    findings = [f for f in _gan(loss, buggy=True) if f.slug == "generator-agrees-with-critic"]
    assert len(findings) == 1
    message = findings[0].message
    assert "test_adversary.py:" in message and "look fake" in message


@pytest.mark.parametrize("loss", ["wgan", "hinge", "bce", "lsgan"])
def test_correct_adversarial_objectives_are_quiet(loss):
    assert "generator-agrees-with-critic" not in slugs(_gan(loss, buggy=False))


def test_two_models_trained_on_one_loss_are_not_players():
    # an encoder and a one-logit head with an optimizer each: the head runs on the encoder's output,
    # but one backward serves both steps and no forward runs on a detached batch
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=20), auto=True)
    try:
        enc = nn.Sequential(nn.Linear(2, 16), nn.ReLU())
        head = nn.Linear(16, 1)
        opt_e, opt_h = torch.optim.SGD(enc.parameters(), lr=0.05), torch.optim.SGD(head.parameters(), lr=0.05)
        for _ in range(120):
            x = _data(64)
            y = 3.0 + x.sum(1, keepdim=True)  # biased targets: every gradient on the output has one sign early on
            loss = F.mse_loss(head(enc(x)), y)
            opt_e.zero_grad()
            opt_h.zero_grad()
            loss.backward()
            opt_h.step()
            opt_e.step()
    finally:
        findings = session.close()
    assert "generator-agrees-with-critic" not in slugs(findings)
