"""Two views of a pair that are one view (``loss-compares-itself``, guards/sameviews.py): planted forms and the
legitimate patterns that run a model twice per step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, markov_tokens, mlp, slugs

STEPS = 60  # the clock checks steps 0-4 and 50


def _shift(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """A random augmentation of 8x8 digits: a shift by up to a pixel and noise."""
    img = x.view(-1, 8, 8)
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=g))
    img = torch.roll(img, shifts=(dx, dy), dims=(1, 2))
    return (img + 0.1 * torch.randn(img.shape, generator=g)).view(len(x), 64)


def _nt_xent(z1: torch.Tensor, z2: torch.Tensor, tau: float = 0.2) -> torch.Tensor:
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / tau
    sim.fill_diagonal_(float("-inf"))
    n = len(z1)
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(sim, target)


@pytest.mark.parametrize("bug", [True, False])
def test_simclr_views_from_one_draw_of_the_augmentation_are_named(bug):
    """SimCLR on digits: the buggy pipeline applies one draw of the augmentation to both views (the same tensor)."""
    torch.manual_seed(0)
    x, _ = digits()
    g = torch.Generator().manual_seed(0)
    model = mlp(out=16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gd = guarded(model, opt, ignore=TIMING)
    for i in range(STEPS):
        xb = x[64 * (i % 20):64 * (i % 20 + 1)]
        if bug:
            v1 = _shift(xb, g)
            v2 = v1
        else:
            v1, v2 = _shift(xb, g), _shift(xb, g)
        loss = _nt_xent(model(v1), model(v2))
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = gd.report(), gd.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-compares-itself"] if bug else []), text
    if bug:
        assert "one draw of a random augmentation" in text.lower() and "test_same_views.py" in text


@pytest.mark.parametrize("bug", [True, False])
def test_a_siamese_pair_whose_second_input_is_a_copy_of_the_first_is_named(bug):
    """A siamese sequence encoder with a cosine-embedding loss: the buggy pair loader returns a copy of the first
    sequence as the second one (equal values, another tensor), the twin a masked-out variant of it."""
    torch.manual_seed(0)
    seq = markov_tokens(640, seed=1)
    enc = nn.Sequential(nn.Embedding(8, 16), nn.Flatten(), nn.Linear(16 * 24, 16))
    opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    gd = guarded(enc, opt, ignore=TIMING)
    g = torch.Generator().manual_seed(0)
    for i in range(STEPS):
        a = seq[32 * (i % 20):32 * (i % 20 + 1)]
        if bug:
            b = a.clone()
        else:
            b = torch.where(torch.rand(a.shape, generator=g) < 0.2, torch.zeros_like(a), a)
        loss = F.cosine_embedding_loss(enc(a), enc(b), torch.ones(len(a)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = gd.report(), gd.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-compares-itself"] if bug else []), text


def test_the_same_input_through_a_model_with_dropout_is_a_deliberate_pair():
    """SimCSE: one input twice through a model with dropout; the two dropout masks are the two views."""
    torch.manual_seed(0)
    x, _ = digits()
    model = mlp(out=16, dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gd = guarded(model, opt, ignore=TIMING)
    for i in range(STEPS):
        xb = x[64 * (i % 20):64 * (i % 20 + 1)]
        loss = _nt_xent(model(xb), model(xb))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()


def test_a_second_forward_kept_for_a_metric_is_not_a_pair():
    """A training loop that runs the model again on the same batch for its running accuracy, in training mode
    with gradients on (wasteful, not wrong): that output never reaches the loss."""
    torch.manual_seed(0)
    x, y = digits()
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gd = guarded(model, opt, ignore=TIMING)
    correct = 0
    for i in range(STEPS):
        xb, yb = x[64 * (i % 20):64 * (i % 20 + 1)], y[64 * (i % 20):64 * (i % 20 + 1)]
        loss = F.cross_entropy(model(xb), yb)
        correct += int((model(xb).argmax(1) == yb).sum())  # before the step: the same step's second forward
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()


def test_a_policy_sampled_again_on_the_same_states_is_not_a_pair():
    """REINFORCE on a bandit whose states are the same each episode: one call expression run 8 times a step."""
    torch.manual_seed(0)
    states = F.one_hot(torch.arange(6), 6).float()
    model = nn.Linear(6, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    gd = guarded(model, opt, ignore=TIMING)
    for _ in range(STEPS):
        log_probs, rewards = [], []
        for _ in range(8):
            dist = torch.distributions.Categorical(logits=model(states))
            actions = dist.sample()
            log_probs.append(dist.log_prob(actions))
            rewards.append((actions == torch.arange(6) % 2).float())
        rewards = torch.stack(rewards)
        loss = -(torch.stack(log_probs) * (rewards - rewards.mean(0))).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()


def test_a_model_of_two_inputs_scored_on_one_user_and_two_items_is_a_pair_of_different_inputs():
    """Matrix factorisation with sampled negatives: model(u, i) and model(u, j) share the users, not the items."""
    torch.manual_seed(0)

    class MF(nn.Module):
        def __init__(self):
            super().__init__()
            self.users, self.items = nn.Embedding(50, 8), nn.Embedding(40, 8)

        def forward(self, u, i):
            return (self.users(u) * self.items(i)).sum(-1)

    model = MF()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gd = guarded(model, opt, ignore=TIMING)
    for _ in range(STEPS):
        u, i, j = torch.randint(50, (64,)), torch.randint(40, (64,)), torch.randint(40, (64,))
        logits = torch.cat([model(u, i), model(u, j)])
        loss = F.binary_cross_entropy_with_logits(logits, torch.cat([torch.ones(64), torch.zeros(64)]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()


def test_one_input_run_twice_for_two_separate_loss_terms_is_not_a_pair():
    """``ce(model(x), y) + mse(model(x).softmax(1), t)``: wasteful, not wrong; the two outputs get different
    gradients."""
    torch.manual_seed(0)
    x, y = digits()
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gd = guarded(model, opt, ignore=TIMING)
    for i in range(STEPS):
        xb, yb = x[64 * (i % 20):64 * (i % 20 + 1)], y[64 * (i % 20):64 * (i % 20 + 1)]
        target = F.one_hot(yb, 10).float()
        loss = F.cross_entropy(model(xb), yb) + 0.1 * F.mse_loss(model(xb).softmax(1), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()
