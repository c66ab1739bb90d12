"""ema-decay-swapped at run time (issue 33): a moving average of the model whose update has the decay
and 1 - decay swapped, so it follows the trained model instead of averaging it.  Planted bugs in two
forms (an EMA class with ``mul_(1 - decay).add_(p, alpha=decay)``; an RL-style soft target update
``copy_((1 - tau) * online + tau * target)``), their clean twins, and two correct copies that must stay
silent: a target network hard-synced every 10 steps (exact copies) and an EMA whose decay warms up."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from tests.guards.helpers import guarded_run, batches, mlp, slugs


def _run(update, steps: int = 60):
    """Train an MLP on digits; after each step ``update(step, model, copy)``; the copy is evaluated
    under no_grad every step (as a mean teacher's or a target network's output is)."""
    torch.manual_seed(0)

    def train():
        model = mlp(hidden=32)
        avg = copy.deepcopy(model).requires_grad_(False)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for step, (xb, yb) in enumerate(batches(32, steps)):
            with torch.no_grad():
                target = avg(xb).softmax(1)
            loss = F.cross_entropy(model(xb), yb) + 0.1 * F.mse_loss(model(xb).softmax(1), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            update(step, model, avg)
    return guarded_run(train)


def ema(decay: float, swapped: bool):
    def update(step, model, avg):
        with torch.no_grad():
            for pa, pm in zip(avg.parameters(), model.parameters()):
                if swapped:
                    pa.mul_(1 - decay).add_(pm, alpha=decay)
                else:
                    pa.mul_(decay).add_(pm, alpha=1 - decay)
    return update


def soft_update(tau: float, swapped: bool):
    def update(step, model, avg):
        with torch.no_grad():
            for pt, po in zip(avg.parameters(), model.parameters()):
                if swapped:
                    pt.copy_((1 - tau) * po + tau * pt)
                else:
                    pt.copy_(tau * po + (1 - tau) * pt)
    return update


def test_an_ema_with_the_decay_swapped_is_named_and_its_twin_is_silent():
    findings, text = _run(ema(0.99, swapped=True))
    assert slugs(findings) == ["ema-decay-swapped"], text
    assert "effective decay is about 0.01" in text
    findings, text = _run(ema(0.99, swapped=False))
    assert findings == [], text


def test_a_soft_target_update_with_tau_swapped_is_named_and_its_twin_is_silent():
    findings, text = _run(soft_update(0.005, swapped=True))
    assert slugs(findings) == ["ema-decay-swapped"], text
    findings, text = _run(soft_update(0.005, swapped=False))
    assert findings == [], text


def test_a_hard_synced_target_and_a_warming_up_ema_are_silent():
    def hard(step, model, avg):
        if step % 10 == 9:
            avg.load_state_dict(model.state_dict())

    def warming(step, model, avg):
        ema(min(0.999, (1 + step) / (10 + step)), swapped=False)(step, model, avg)

    for update in (hard, warming):
        findings, text = _run(update)
        assert findings == [], text
