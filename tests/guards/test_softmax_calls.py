"""softmax-over-batch on a model's evaluation outputs (overt/guards/softmax_dim.py, issue 33 w32):
``torch.softmax(model(x), dim=0)`` in an evaluation loop is named at its line; dim=1, a 1-D call
and a softmax over one score per sample (pooling over a set) stay quiet."""

from __future__ import annotations

import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, mlp, slugs, train, val_batches


def _run(predict) -> tuple[list, str]:
    original, method = torch.softmax, vars(torch.Tensor).get("softmax")
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=8)
    model.eval()
    with torch.inference_mode():
        for xb, _ in val_batches(32):
            predict(model, xb)
    model.train()
    train(model, opt, steps=2)  # training resumes: the wrappers are put back
    assert torch.softmax is original and vars(torch.Tensor).get("softmax") is method  # put back
    return g.report(), g.session.options.stream.getvalue()


def test_a_softmax_over_the_batch_of_predictions_is_named_at_its_line():
    findings, text = _run(lambda model, xb: torch.softmax(model(xb), dim=0).argmax(1))
    assert slugs(findings) == ["softmax-over-batch"], text
    assert "test_softmax_calls.py:" in findings[0].where


def test_the_tensor_method_and_log_softmax_are_seen_too():
    findings, _ = _run(lambda model, xb: model(xb).log_softmax(0))
    assert slugs(findings) == ["softmax-over-batch"]


def test_a_softmax_over_the_batch_of_scaled_logits_is_named():
    findings, _ = _run(lambda model, xb: nn.functional.softmax(model(xb) / 2.0, dim=0))
    assert slugs(findings) == ["softmax-over-batch"]


def test_softmax_over_classes_and_over_set_scores_is_quiet():
    def predict(model, xb):
        logits = model(xb)
        torch.softmax(logits, dim=1)
        torch.softmax(logits[0], dim=0)  # one sample: 1-D
        nn.functional.softmax(logits[:, :1], dim=0)  # one score per sample, pooled over the set

    findings, text = _run(predict)
    assert findings == [], text


def _reinforce(dim: int) -> tuple[list, str]:
    """A policy that acts on one state at a time (1-D: fine) and learns on a batch of states with a
    functional log_softmax: over dim 0 it normalises each action over the states of the batch."""
    from tests.guards.helpers import digits

    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    g = guarded(policy, opt, ignore=TIMING)
    x, y = digits()
    for episode in range(10):
        idx = torch.randint(1400, (16,))
        with torch.no_grad():
            actions = torch.stack([torch.multinomial(torch.softmax(policy(x[i]), dim=0), 1)[0] for i in idx])
        reward = (actions == y[idx]).float()
        logp = torch.log_softmax(policy(x[idx]), dim=dim).gather(1, actions[:, None]).squeeze(1)
        loss = -(logp * (reward - reward.mean())).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_a_functional_log_softmax_over_the_batch_in_a_training_loss_is_named():
    findings, text = _reinforce(0)
    assert slugs(findings) == ["softmax-over-batch"], text
    assert "training outputs" in findings[0].message and "test_softmax_calls.py:" in findings[0].where
    assert _reinforce(-1)[0] == []
