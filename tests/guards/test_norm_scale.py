"""normaliser-not-scale-invariant (overt/guards/normscale.py, issue 33 w321): a normalisation layer written by
hand whose output changes with its input's scale (a layer norm dividing by the squared or plain variance, no
division at all) or with the scale of the other samples of its batch (a layer norm reducing over dimension 0);
correct hand-written layer, RMS, group and batch norms, a conditional layer norm, torch's own layers, a fixed-
statistics standardiser and a norm wrapper block stay quiet.  Small real runs on digits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import evaluate, guarded, slugs, train


class LayerNorm(nn.Module):
    """A hand-written layer norm; ``power`` is what the divisor raises ``variance + eps`` to (0.5 is right),
    ``dim`` the dimension reduced over (-1 is right)."""

    def __init__(self, dim: int, power: float = 0.5, over: int = -1, eps: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        self.power, self.over, self.eps = power, over, eps

    def forward(self, x):
        mean = x.mean(self.over, keepdim=True)
        variance = ((x - mean) ** 2).mean(self.over, keepdim=True)
        std = (variance + self.eps) ** self.power
        return (x - mean) / std * self.gamma + self.beta


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class GroupNorm(nn.Module):
    def __init__(self, groups: int, dim: int):
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        g = x.reshape(x.shape[0], self.groups, -1)
        g = (g - g.mean(-1, keepdim=True)) / (g.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()
        return g.reshape(x.shape) * self.weight


class BatchNorm(nn.Module):
    """A hand-written batch norm with running statistics (buffers the probe must put back)."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))

    def forward(self, x):
        if self.training:
            mean, var = x.mean(0), x.var(0, unbiased=False)
            with torch.no_grad():
                self.running_mean.mul_(0.9).add_(0.1 * mean)
                self.running_var.mul_(0.9).add_(0.1 * var)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / (var + 1e-5).sqrt()


class ConditionalLayerNorm(nn.Module):
    """Gain and bias from a condition vector (TPlinker's form); the condition is another input of another shape."""

    def __init__(self, dim: int, cond: int):
        super().__init__()
        self.gain = nn.Linear(cond, dim)
        self.bias = nn.Linear(cond, dim)

    def forward(self, x, cond):
        mean = x.mean(-1, keepdim=True)
        std = ((x - mean) ** 2).mean(-1, keepdim=True).add(1e-5).sqrt()
        return (x - mean) / std * (1 + self.gain(cond)).unsqueeze(1) + self.bias(cond).unsqueeze(1)


class FixedStandardNorm(nn.Module):
    """Standardisation by fixed data statistics (not scale invariant, by design; its name says so)."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.full((dim,), 0.3))
        self.register_buffer("std", torch.full((dim,), 0.4))

    def forward(self, x):
        return (x - self.mean) / self.std


class AddNorm(nn.Module):
    """A post-norm residual block (x + f(x), then a norm): not scale invariant, by design."""

    def __init__(self, dim: int):
        super().__init__()
        self.f = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x + torch.relu(self.f(x)) + 1.0)


class Body(nn.Module):
    def __init__(self, norm: nn.Module, cond: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.inp, self.norm, self.out = nn.Linear(64, 32), norm, nn.Linear(32, 10)
        self.cond = nn.Linear(64, 8) if cond else None

    def forward(self, x):
        h = self.inp(x)
        if self.cond is not None:
            h = self.norm(h.unsqueeze(1).repeat(1, 3, 1), self.cond(x)).mean(1)
        else:
            h = self.norm(h)
        return self.out(torch.relu(h))


def _run(model: nn.Module, steps: int = 8):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=steps)
    evaluate(model)
    return g.report()


def test_a_layer_norm_dividing_by_the_squared_variance_is_named_with_its_divisor_line():
    findings = _run(Body(LayerNorm(32, power=2)))
    assert slugs(findings) == ["normaliser-not-scale-invariant"]
    f = findings[0]
    assert f.severity == "error"
    assert "tests/guards/test_norm_scale.py:30" in f.where  # std = (variance + self.eps) ** self.power
    assert "power -3.00" in f.message and "power 4.00" in f.message
    assert "torch.sqrt(variance + eps)" in f.fix


def test_a_layer_norm_dividing_by_the_variance_or_by_nothing_is_named():
    for power, grows in ((1.0, "-1.00"), (0.0, "+1.00")):
        findings = _run(Body(LayerNorm(32, power=power)))
        assert slugs(findings) == ["normaliser-not-scale-invariant"], power
        assert f"power {grows}" in findings[0].message


def test_a_layer_norm_that_reduces_over_the_batch_is_named():
    findings = _run(Body(LayerNorm(32, over=0)))
    assert "normaliser-not-scale-invariant" in slugs(findings)  # batch-dependent-eval sees the symptom too
    f = next(f for f in findings if f.slug == "normaliser-not-scale-invariant")
    assert "batch dimension" in f.message and "dimension 0" in f.fix


def test_correct_hand_written_norms_are_quiet():
    assert _run(Body(LayerNorm(32))) == []
    assert _run(Body(RMSNorm(32))) == []
    assert _run(Body(GroupNorm(4, 32))) == []
    assert _run(Body(BatchNorm(32))) == []
    assert _run(Body(ConditionalLayerNorm(32, 8), cond=True)) == []
    assert _run(Body(nn.LayerNorm(32))) == []


def test_fixed_statistics_and_norm_blocks_are_not_judged():
    assert _run(Body(FixedStandardNorm(32))) == []
    assert _run(Body(AddNorm(32))) == []


class FunctionalLayerNorm(nn.Module):
    """nanoGPT's: F.layer_norm with an optional bias."""

    def __init__(self, dim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class ChannelsFirstLayerNorm(nn.Module):
    """ConvNeXt's channels-first layer norm on (N, C, H, W)."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        x = (x - u) / torch.sqrt((x - u).pow(2).mean(1, keepdim=True) + 1e-6)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class AdaLayerNorm(nn.Module):
    """Scale and shift from an embedding, on a sequence-first (T, B, D) input."""

    def __init__(self, dim: int):
        super().__init__()
        self.lin = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)

    def forward(self, x, emb):
        scale, shift = self.lin(F.silu(emb)).unsqueeze(0).chunk(2, -1)
        return self.norm(x) * (1 + scale) + shift


class Layouts(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp, self.emb, self.out = nn.Linear(64, 32), nn.Linear(64, 8), nn.Linear(32, 10)
        self.ln, self.cf, self.ada = FunctionalLayerNorm(32, True), ChannelsFirstLayerNorm(4), AdaLayerNorm(8)

    def forward(self, x):
        h = self.cf(self.ln(self.inp(x)).reshape(-1, 4, 2, 4)).reshape(-1, 4, 8)
        h = self.ada(h.transpose(0, 1), self.emb(x)).transpose(0, 1)
        return self.out(torch.relu(h.reshape(-1, 32)))


def test_functional_channels_first_and_adaptive_sequence_first_norms_are_probed_and_quiet(monkeypatch):
    from overt.guards.normscale import NormScaleChecks

    probed = []
    probe = NormScaleChecks._probe

    def recorded(self, module, *args):
        probed.append(type(module).__name__)
        return probe(self, module, *args)

    monkeypatch.setattr(NormScaleChecks, "_probe", recorded)
    assert _run(Layouts()) == []
    assert sorted(probed) == ["AdaLayerNorm", "ChannelsFirstLayerNorm", "FunctionalLayerNorm"]


def test_the_probe_leaves_the_run_unchanged(monkeypatch):
    """Weights, buffers and the random generator after a guarded run equal those of the same run without this
    check's probe."""
    from overt.guards.normscale import NormScaleChecks

    def fit():
        model = Body(BatchNorm(32))
        _run(model)
        return [t.clone() for t in model.state_dict().values()], torch.rand(3)

    torch.manual_seed(1)
    probed, draw = fit()
    monkeypatch.setattr(NormScaleChecks, "on_checked_forward", lambda self, info, args, light: None)
    torch.manual_seed(1)
    plain, plain_draw = fit()
    assert all(torch.equal(a, b) for a, b in zip(probed, plain)) and torch.equal(draw, plain_draw)
