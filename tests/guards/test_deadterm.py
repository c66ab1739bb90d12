"""loss-term-constant (overt/guards/deadterm.py, issue 33; the wild corpus's w364): a term of a summed loss whose
own gradient on the parameters it reaches is rounding.  Planted: a "confidence" term that sums each row's softmax
(always 1), and a load-balancing term over a router whose top-k weights are renormalised before they are summed.
Twins stay quiet: an entropy term (a real gradient), a weak penalty on the weights (a gradient far below the
other term's that keeps its direction), a hinge whose margins all hold (a gradient exactly zero,
saturated by design), a run too short to span the probes, and a program that registers a tensor hook of its
own on the checked steps (the probe stands aside, and the hook runs once per backward).  Small real runs on the
digits, found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit

SLUG = "loss-term-constant"


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def _run(term, steps: int = 70, weight: float = 0.1) -> list:
    model = _mlp()

    def losses():
        for xb, yb in batches(64, steps):
            logits = model(xb)
            yield F.cross_entropy(logits, yb) + weight * term(logits)

    return guarded_fit(model.parameters(), losses())


def _found(findings: list) -> list:
    return [f for f in findings if f.slug == SLUG]


def test_a_term_constant_by_its_algebra_is_named():
    found = _found(_run(lambda z: -z.softmax(1).sum(1).mean()))  # each row's probabilities sum to one
    assert len(found) == 1, found
    msg = found[0].message
    assert "adds 2 terms" in msg and "a mean over a 64 tensor" in msg and "weight -0.1" in msg, msg
    assert "helpers.py" in found[0].where  # the backward's line


def test_a_real_regulariser_is_quiet():
    def entropy(z):
        p = z.softmax(1)
        return (p * p.clamp_min(1e-8).log()).sum(1).mean()

    assert _found(_run(entropy)) == []


def test_a_tiny_real_penalty_that_keeps_its_direction_is_quiet():
    # the gradient is 1e-10 of the cross-entropy's, but it is 2 * 1e-8 * w / n at every step: a signal, not rounding
    model_weight = []

    def penalty(z):
        w = model_weight[0]
        return (1e-4 * w).pow(2).mean()

    model = _mlp()
    model_weight.append(model[0].weight)

    def losses():
        for xb, yb in batches(64, 70):
            logits = model(xb)
            yield F.cross_entropy(logits, yb) + penalty(logits)

    assert _found(guarded_fit(model.parameters(), losses())) == []


def test_a_hinge_whose_margins_all_hold_is_quiet():
    # the term's gradient is exactly zero (saturated by design): it proves nothing
    assert _found(_run(lambda z: F.relu(-100.0 - z).mean())) == []


def test_a_run_shorter_than_the_span_is_quiet():
    assert _found(_run(lambda z: -z.softmax(1).sum(1).mean(), steps=12)) == []


class _Router(nn.Module):
    def __init__(self, bug: bool):
        super().__init__()
        torch.manual_seed(0)
        self.bug = bug
        self.inp = nn.Linear(64, 32)
        self.gate = nn.Linear(32, 4)
        self.experts = nn.ModuleList([nn.Linear(32, 10) for _ in range(4)])

    def forward(self, x):
        h = torch.relu(self.inp(x))
        probs = self.gate(h).softmax(-1)
        top, idx = probs.topk(2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        outs = torch.stack([e(h) for e in self.experts], 1)
        out = (outs.gather(1, idx[..., None].expand(-1, -1, 10)) * top[..., None]).sum(1)
        frac = F.one_hot(idx, 4).float().sum(1).mean(0) / 2
        if self.bug:  # [4, 1] x [1, 2] broadcast and summed: sum(frac) * sum(top weights) = 1 * 1
            aux = 4 * (frac[:, None] * top.mean(0)[None, :]).sum()
        else:
            aux = 4 * (frac * probs.mean(0)).sum()
        return out, aux


def _moe(bug: bool) -> list:
    model = _Router(bug)

    def losses():
        for xb, yb in batches(64, 70):
            out, aux = model(xb)
            yield F.cross_entropy(out, yb) + 0.05 * aux

    return guarded_fit(model.parameters(), losses())


def test_a_load_balancing_loss_broadcast_to_a_constant_is_named_at_the_model_output():
    found = _found(_moe(True))
    assert len(found) == 1, found
    msg = found[0].message
    assert "output 1 of _Router's forward at " in msg and "test_deadterm.py:" in msg, msg


def test_a_load_balancing_loss_over_the_experts_is_quiet():
    assert _found(_moe(False)) == []


def test_a_tensor_hook_of_the_program_runs_once_per_backward():
    model = _mlp()
    calls: list[int] = []

    def losses():
        for xb, yb in batches(64, 70):
            logits = model(xb)
            logits.register_hook(lambda g: calls.append(1))
            yield F.cross_entropy(logits, yb) - 0.1 * logits.softmax(1).sum(1).mean()

    findings = guarded_fit(model.parameters(), losses())
    assert len(calls) == 70  # the probe never backwards a step whose graph carries the program's own hook
    assert _found(findings) == []
