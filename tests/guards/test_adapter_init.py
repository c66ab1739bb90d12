"""adapter-not-identity-at-init (issue 33, the wild corpus's w105): an adapter branch added to a frozen
pretrained module that is not zero before training.  An MLP is pretrained on digits, frozen, and adapted
to noisy digits.  Planted: LoRA with B drawn like A (``kaiming_uniform_``, hao-ai-lab/FastVideo#781) under
``overt.guard``; a parallel bottleneck adapter (``base(x) + up(relu(down(x)))``, no biases) with a random
up-projection, under a session that finds models and optimizers itself (``overt run``'s way), the pretraining
seen by the same session; each with its twin (B, the up-projection at zero).  Silent: a learned additive
bias on a frozen layer (one tensor: not an adapter), a trainable head on a frozen body, LoRA whose factors
were trained by an earlier optimizer (a second stage)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded, guarded_run, slugs

SLUG = "adapter-not-identity-at-init"


def _pretrained():
    torch.manual_seed(0)
    x, y = digits()
    base = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(base.parameters(), lr=1e-2)
    for i in range(0, 960, 64):
        opt.zero_grad()
        F.cross_entropy(base(x[i:i + 64]), y[i:i + 64]).backward()
        opt.step()
    for p in base.parameters():
        p.requires_grad_(False)
    return base


def _noisy():
    x, y = digits()
    g = torch.Generator().manual_seed(1)
    return (x + 0.25 * torch.randn(x.shape, generator=g)).clamp(0, 1), y


class LoRALinear(nn.Module):
    def __init__(self, layer, rank=8, alpha=32, b_random=False):
        super().__init__()
        self.base = layer
        self.lora_A = nn.Parameter(torch.empty(rank, layer.in_features))
        self.lora_B = nn.Parameter(torch.zeros(layer.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        if b_random:
            nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale


class ParallelAdapter(nn.Module):
    def __init__(self, layer, width=8, up_random=False):
        super().__init__()
        self.layer = layer
        self.down = nn.Linear(layer.in_features, width, bias=False)
        self.up = nn.Linear(width, layer.out_features, bias=False)
        if not up_random:
            nn.init.zeros_(self.up.weight)

    def forward(self, x):
        return self.layer(x) + self.up(F.relu(self.down(x)))


class BiasShift(nn.Module):
    """A learned shift added to a frozen layer's output: one trainable tensor, not an adapter."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.shift = nn.Parameter(torch.randn(layer.out_features))

    def forward(self, x):
        return self.layer(x) + self.shift


def _adapt(model, opt, steps=5):
    x, y = _noisy()
    for i in range(0, 64 * steps, 64):
        opt.zero_grad()
        F.cross_entropy(model(x[i:i + 64]), y[i:i + 64]).backward()
        opt.step()


def _lora_guarded(b_random):
    base = _pretrained()
    torch.manual_seed(1)
    model = nn.Sequential(LoRALinear(base[0], b_random=b_random), nn.ReLU(), LoRALinear(base[2], b_random=b_random))
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    g = guarded(model, opt)
    _adapt(model, opt)
    return g.report()


def test_lora_b_random_is_named():
    findings = _lora_guarded(True)
    assert SLUG in slugs(findings)
    f = next(f for f in findings if f.slug == SLUG)
    assert "lora_A" in f.message and "lora_B" in f.message and "zero" in f.fix
    assert "test_adapter_init.py" in f.where


def test_lora_b_zero_is_quiet():
    assert SLUG not in slugs(_lora_guarded(False))


def _parallel_run(up_random):
    def train():
        base = _pretrained()  # pretrained under the same session, then frozen
        torch.manual_seed(2)
        model = nn.Sequential(ParallelAdapter(base[0], up_random=up_random), nn.ReLU(), base[2])
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
        _adapt(model, opt, steps=12)

    findings, _ = guarded_run(train)
    return findings


def test_parallel_adapter_up_random_is_named_under_run():
    assert SLUG in slugs(_parallel_run(True))


def test_parallel_adapter_up_zero_is_quiet_under_run():
    assert SLUG not in slugs(_parallel_run(False))


def test_single_additive_tensor_is_not_an_adapter():
    base = _pretrained()
    torch.manual_seed(1)
    model = nn.Sequential(BiasShift(base[0]), nn.ReLU(), base[2])
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    g = guarded(model, opt)
    _adapt(model, opt)
    assert SLUG not in slugs(g.report())


def test_trainable_head_on_frozen_body_is_quiet():
    base = _pretrained()
    torch.manual_seed(1)
    model = nn.Sequential(base[0], nn.ReLU(), nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    g = guarded(model, opt)
    _adapt(model, opt)
    assert SLUG not in slugs(g.report())


def test_second_stage_over_trained_factors_is_quiet():
    def train():
        base = _pretrained()
        torch.manual_seed(1)
        model = nn.Sequential(LoRALinear(base[0]), nn.ReLU(), LoRALinear(base[2]))
        params = [p for p in model.parameters() if p.requires_grad]
        _adapt(model, torch.optim.Adam(params, lr=1e-2), steps=12)  # stage one: B moves away from zero
        again = nn.Sequential(model[0], nn.Tanh(), model[2])  # stage two: a new model and optimizer over the
        _adapt(again, torch.optim.SGD(params, lr=1e-3), steps=12)  # trained factors (B is no longer zero)
        assert float(model[0].lora_B.abs().max()) > 0

    findings, _ = guarded_run(train)
    assert SLUG not in slugs(findings)


class BNBlock(nn.Module):
    """A frozen linear layer followed by a BatchNorm in training mode: its running statistics move with every
    forward, without a version bump of the running buffers."""

    def __init__(self, layer):
        super().__init__()
        self.in_features, self.out_features = layer.in_features, layer.out_features
        self.linear = layer
        self.norm = nn.BatchNorm1d(layer.out_features, affine=False)

    def forward(self, x):
        return self.norm(self.linear(x))


def _bn_adapted(guard: bool):
    base = _pretrained()
    torch.manual_seed(3)
    block = BNBlock(base[0])
    model = nn.Sequential(ParallelAdapter(block, up_random=True), nn.ReLU(), base[2])
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    g = guarded(model, opt) if guard else None
    _adapt(model, opt, steps=6)
    return block.norm, (g.report() if g else [])


def test_the_probe_leaves_batchnorm_statistics_as_an_unguarded_run_has_them():
    # the probe runs the adapted module again with its factors zeroed; BatchNorm's running statistics move on
    # those forwards without bumping their version counter, so they must be put back whatever their version says
    plain, _ = _bn_adapted(False)
    norm, findings = _bn_adapted(True)
    assert SLUG in slugs(findings)
    assert torch.equal(norm.running_mean, plain.running_mean) and torch.equal(norm.running_var, plain.running_var)
    assert int(norm.num_batches_tracked) == int(plain.num_batches_tracked)


class LoConLinear(nn.Module):
    """A LoCon-style wrapper that keeps the frozen layer's bound ``forward`` (not a child) and zero-initialises its
    up-projection; ``scaled_sum`` applies multiplier * scale to the frozen output plus the branch (the wild
    corpus's w337, KohakuBlueleaf/LyCORIS#26) instead of to the branch alone."""

    def __init__(self, org, scaled_sum, dim=4, alpha=1.0):
        super().__init__()
        self.org_forward = org.forward
        self.lora_down = nn.Linear(org.in_features, dim, bias=False)
        self.lora_up = nn.Linear(dim, org.out_features, bias=False)
        nn.init.zeros_(self.lora_up.weight)
        self.scale, self.multiplier, self.scaled_sum = alpha / dim, 1.0, scaled_sum

    def forward(self, x):
        if self.scaled_sum:
            return (self.org_forward(x) + self.lora_up(self.lora_down(x))) * self.multiplier * self.scale
        return self.org_forward(x) + self.lora_up(self.lora_down(x)) * self.multiplier * self.scale


class GeluBlock(nn.Module):
    """A frozen layer, a zero-initialised branch and a GELU after their sum: with the branch off the block is
    GELU(frozen), not a multiple of the frozen output: nothing to prove."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.down = nn.Linear(layer.in_features, 4, bias=False)
        self.up = nn.Linear(4, layer.out_features, bias=False)
        nn.init.zeros_(self.up.weight)

    def forward(self, x):
        return F.gelu(self.layer(x) + self.up(self.down(x)))


def _wrapped(make):
    base = _pretrained()
    torch.manual_seed(1)
    model = nn.Sequential(make(base[0]), nn.ReLU(), base[2])
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    g = guarded(model, opt)
    _adapt(model, opt, steps=8)
    return g.report()


def test_a_wrapper_that_scales_the_frozen_output_with_its_branch_is_named():
    findings = _wrapped(lambda layer: LoConLinear(layer, scaled_sum=True))
    assert slugs(findings).count(SLUG) == 1, findings
    f = next(f for f in findings if f.slug == SLUG)
    assert "0.25 times the frozen module's output" in f.message and "lora_down.weight" in f.message
    assert "LoConLinear" in f.message and "test_adapter_init.py" in f.where
    assert "branch only" in f.fix


def test_the_wrapper_scaling_its_branch_alone_and_a_gelu_block_are_quiet():
    assert SLUG not in slugs(_wrapped(lambda layer: LoConLinear(layer, scaled_sum=False)))
    assert SLUG not in slugs(_wrapped(GeluBlock))
