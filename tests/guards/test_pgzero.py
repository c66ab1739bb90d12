"""loss-term-constant, widened (overt/guards/pgzero.py, issue 33; the wild corpus's w441 and w454): a policy-gradient
loss whose no-gradient weight (advantage or reward) is exactly zero on every sample of every checked step.
Planted: group-relative advantages over groups of one completion (the baseline is the reward itself), and a reward
that can never be earned (a completion compared with something it never equals).  Twins stay quiet: groups of four
completions, rewards that are zero on the first steps and then earned (sparse at the start), a run too short to
span the probes, and a soft-target cross-entropy (targets times log_softmax, never all zero).  Small real runs on
the digits (a one-step bandit over the ten classes), found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit

SLUG = "loss-term-constant"


def _bandit(per_prompt: int, steps: int = 230, earned=lambda step, a, y: a == y) -> list:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def losses():
        for step, (xb, yb) in enumerate(batches(32, steps)):
            x = xb.repeat_interleave(per_prompt, 0)
            y = yb.repeat_interleave(per_prompt, 0)
            logp_all = F.log_softmax(model(x), -1)
            with torch.no_grad():
                actions = torch.multinomial(logp_all.exp(), 1).squeeze(1)
            rewards = earned(step, actions, y).float().view(-1, per_prompt)
            adv = (rewards - rewards.mean(1, keepdim=True)).view(-1)
            yield -(adv * logp_all.gather(1, actions[:, None]).squeeze(1)).mean()

    return guarded_fit(model.parameters(), losses())


def _found(findings: list) -> list:
    return [f for f in findings if f.slug == SLUG]


def test_a_group_baseline_over_groups_of_one_is_named():
    found = _found(_bandit(1))
    assert len(found) == 1, found
    msg = found[0].message
    assert "exactly zero on every sample" in msg and "groups of one completion" in msg, msg
    assert "test_pgzero.py" in found[0].where or "helpers.py" in found[0].where


def test_a_reward_never_earned_is_named():
    assert len(_found(_bandit(4, earned=lambda step, a, y: a == y + 10))) == 1  # no action is ever a label + 10


def test_a_categorical_log_prob_over_groups_of_one_is_named():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def losses():
        for xb, yb in batches(32, 230):
            dist = torch.distributions.Categorical(logits=model(xb))
            actions = dist.sample()
            rewards = (actions == yb).float()[:, None]
            adv = (rewards - rewards.mean(1, keepdim=True)).squeeze(1)  # one completion per prompt
            yield -(dist.log_prob(actions) * adv).mean()

    assert len(_found(guarded_fit(model.parameters(), losses()))) == 1


def test_groups_of_four_are_quiet():
    assert _found(_bandit(4)) == []


def test_rewards_sparse_at_the_start_are_quiet():
    assert _found(_bandit(4, earned=lambda step, a, y: (a == y) & (step >= 120))) == []


def test_a_run_shorter_than_the_span_is_quiet():
    assert _found(_bandit(1, steps=150)) == []


def test_a_soft_target_cross_entropy_is_quiet():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def losses():
        for xb, yb in batches(64, 230):
            soft = F.one_hot(yb, 10).float() * 0.9 + 0.01
            yield -(soft * F.log_softmax(model(xb), -1)).sum(1).mean()

    assert _found(guarded_fit(model.parameters(), losses())) == []
