"""eval-not-train-expectation (overt/guards/evalscale.py, issue 33 w255): a random regulariser whose eval-mode
output is not the expectation of its training-mode output (stochastic depth whose keep probability is never
applied in evaluation, a hand-written dropout without 1/(1-p)); correct regularisers, nonlinear ones, noise
injection, BatchNorm and Monte Carlo dropout kept on stay quiet.  Small real runs on digits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import batches, evaluate, guarded, slugs, train


class StochasticDepth(nn.Module):
    """A residual block whose branch is dropped per sample in training, scaled by its keep probability in eval
    (``dead_eval``: the eval branch is never reached)."""

    def __init__(self, dim: int, drop: float, dead_eval: bool):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.drop, self.dead_eval = drop, dead_eval

    def forward(self, x):
        out = self.f(x)
        if (self.training and self.drop) if self.dead_eval else self.drop:
            keep = 1 - self.drop
            if self.training:
                out = out * (torch.rand(x.shape[0], 1, device=x.device) < keep).float()
            else:
                out = out * keep
        return x + out


class HandDropout(nn.Module):
    """A hand-written dropout: ``inverted`` scales the kept units by 1/(1-p)."""

    def __init__(self, p: float, inverted: bool):
        super().__init__()
        self.p, self.inverted = p, inverted

    def forward(self, x):
        if not self.training:
            return x
        keep = (torch.rand_like(x) >= self.p).float()
        return x * keep / (1 - self.p) if self.inverted else x * keep


class NoisyGelu(nn.Module):
    """Correct, and nonlinear after its random numbers: dropout then GELU, Gaussian noise in training."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p
        self.lin = nn.Linear(64, 64)

    def forward(self, x):
        h = F.gelu(F.dropout(self.lin(x), self.p, self.training))
        return h + 0.1 * torch.randn_like(h) if self.training else h


class AlwaysSampling(nn.Module):
    """Monte Carlo dropout on purpose: the dropout is on in eval mode too."""

    def forward(self, x):
        return x * (torch.rand_like(x) >= 0.5).float() * 2


class RandomFlip(nn.Module):
    """An augmentation inside the model: the features reversed for a random half of the samples in training,
    and a log of the calls (a list the probe must put back)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, x):
        self.calls.append(x.shape[0])
        if self.training:
            flip = torch.rand(x.shape[0], 1, device=x.device) < 0.5
            return torch.where(flip, x.flip(-1), x)
        return x


def _model(layer: nn.Module, bn: bool = False) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), *([nn.BatchNorm1d(64)] if bn else []), nn.ReLU(), layer,
                         nn.Linear(64, 10))


def _run(model: nn.Module, steps: int = 8):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=steps)
    evaluate(model)
    return g.report()


def test_stochastic_depth_whose_eval_scale_is_dead_code_is_named_with_its_class_and_line():
    findings = _run(_model(StochasticDepth(64, 0.8, dead_eval=True)))
    assert slugs(findings) == ["eval-not-train-expectation"]
    f = findings[0]
    assert f.severity == "error"
    assert "StochasticDepth.forward at tests/guards/test_eval_scale.py:27" in f.where
    assert "not their expectation" in f.message and "keep_prob" in f.fix


def test_a_hand_written_dropout_without_the_inverse_keep_scale_is_named():
    findings = _run(_model(HandDropout(0.5, inverted=False)))
    assert slugs(findings) == ["eval-not-train-expectation"]
    assert "HandDropout" in findings[0].where


def test_the_correct_twins_are_quiet():
    assert _run(_model(StochasticDepth(64, 0.8, dead_eval=False))) == []
    assert _run(_model(HandDropout(0.5, inverted=True))) == []


def test_nonlinear_regularisers_noise_batchnorm_and_monte_carlo_dropout_are_quiet(monkeypatch):
    assert _run(_model(NoisyGelu(0.5))) == []
    assert _run(_model(HandDropout(0.3, inverted=True), bn=True)) == []
    assert _run(_model(AlwaysSampling())) == []  # eval-mode output random too: not judged
    flip = RandomFlip()
    assert _run(_model(flip)) == []  # values moved to other positions: an augmentation
    from overt.guards.evalscale import EvalScaleChecks
    monkeypatch.setattr(EvalScaleChecks, "on_checked_forward", lambda self, info, args, light: None)
    unprobed = RandomFlip()
    _run(_model(unprobed))
    assert len(flip.calls) == len(unprobed.calls)  # the probe's calls of the module are not left in its log


def test_the_probe_leaves_the_run_unchanged(monkeypatch):
    """Weights, random generator and modes after a guarded run equal those of the same guarded run without this
    check's probe (the other checks alike in both)."""
    from overt.guards.evalscale import EvalScaleChecks

    def fit():
        torch.manual_seed(0)
        model = _model(StochasticDepth(64, 0.8, dead_eval=True))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = guarded(model, opt, ignore=TIMING)
        torch.manual_seed(1)
        train(model, opt, steps=4)
        after = torch.rand(3)
        found = slugs(g.report())
        return [p.detach().clone() for p in model.parameters()], after, [m.training for m in model.modules()], found

    w1, r1, m1, s1 = fit()
    monkeypatch.setattr(EvalScaleChecks, "on_checked_forward", lambda self, info, args, light: None)
    w2, r2, m2, s2 = fit()
    assert s1 == ["eval-not-train-expectation"] and s2 == []
    assert all(torch.equal(a, b) for a, b in zip(w1, w2))
    assert torch.equal(r1, r2) and m1 == m2


def test_only_the_first_checked_forward_is_probed():
    model = _model(StochasticDepth(64, 0.8, dead_eval=False))
    calls = []
    block = model[2]
    original = block.forward
    block.forward = lambda x: (calls.append(1), original(x))[1]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for x, y in batches(32, 8):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    assert g.report() == []
    extra = len(calls) - 8
    assert extra > 0 and extra <= 40  # the draws and the two eval passes of one probe, no more


class DropFractionDropout(nn.Module):
    """A hand-written dropout that multiplies the kept units by the fraction dropped (the wild corpus's w347,
    ayrna/dlordinal#126) where the fraction kept's inverse belongs: the eval output (the input) lies outside
    the range of the training draws (0 or a fraction of the input), at a constant multiple of their average."""

    def __init__(self, p: float, fixed: bool):
        super().__init__()
        self.p, self.fixed = p, fixed

    def forward(self, x):
        if not self.training:
            return x
        mask = (torch.rand_like(x) > self.p).float()
        zeros = (mask == 0).sum()
        factor = x.numel() / (x.numel() - zeros + 1e-9) if self.fixed else zeros / x.numel()
        return x * mask * factor


class Temperature(nn.Module):
    """Noisy logits in training, probabilities in eval: another quantity by design (outside the draws' range and
    not a multiple of their average), not judged."""

    def forward(self, x):
        return x + 0.1 * torch.randn_like(x) if self.training else x.softmax(-1)


def test_a_dropout_scaled_by_the_drop_fraction_is_named_with_the_factor():
    findings = _run(_model(DropFractionDropout(0.5, fixed=False)))
    assert slugs(findings) == ["eval-not-train-expectation"]
    assert "DropFractionDropout" in findings[0].where and "times their average" in findings[0].message


def test_its_twin_and_an_eval_output_of_another_kind_are_quiet():
    assert _run(_model(DropFractionDropout(0.5, fixed=True))) == []
    assert _run(_model(Temperature())) == []
