"""custom-backward-not-linear (issue 33; tests/wild w262): a user-written autograd.Function whose backward is not a
vector-Jacobian product -- a ternary quantiser's latent-weight gradient built from the weights instead of the
incoming gradient (w262's form), a straight-through estimator that returns ones instead of the gradient, a weight
decay folded into backward -- each beside a twin whose backward is linear in the gradient; correct custom backwards
near the premise silent (straight-through with clipping, gradient reversal, a clip of the incoming gradient by its
norm, noise drawn in backward, ``setup_context`` and ``once_differentiable`` styles), and the probe leaves the
program's numbers exactly as a run without the guard.  Real small runs on the digits."""

from __future__ import annotations


import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from overt.guards import gradinv
from tests.guards.helpers import batches, guarded_run, slugs


class Ternarize(torch.autograd.Function):
    bug = False

    @staticmethod
    def forward(ctx, w, w_p, w_n):
        delta = 0.05 * w.abs().max()
        a, b = (w > delta).float(), (w < -delta).float()
        ctx.save_for_backward(w, a, b, w_p, w_n)
        return w_p * a - w_n * b

    @staticmethod
    def backward(ctx, grad):
        w, a, b, w_p, w_n = ctx.saved_tensors
        g = w if Ternarize.bug else grad
        w_grad = a * g * w_p + b * g * w_n + (1 - a - b) * g
        return w_grad, (a * grad).sum().view(1), -(b * grad).sum().view(1)


class SignSTE(torch.autograd.Function):
    mode = "clip"  # "clip": grad masked where |x| > 1; "ones": ones instead of grad (bug); "decay": + 1e-3 * x

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if SignSTE.mode == "ones":
            return torch.ones_like(x) * (x.abs() <= 1)
        if SignSTE.mode == "decay":
            return grad * (x.abs() <= 1) + 1e-3 * x
        if SignSTE.mode == "normclip":  # deliberate shaping: the incoming gradient clipped by its norm
            return grad * (x.abs() <= 1) / grad.norm().clamp_min(1.0)
        if SignSTE.mode == "noise":  # deliberate gradient noise: drawn in backward
            return grad * (x.abs() <= 1) + 1e-3 * torch.randn_like(grad)
        if SignSTE.mode == "npnoise":  # the same, drawn from numpy
            return grad * (x.abs() <= 1) + 1e-3 * torch.from_numpy(np.random.randn(*grad.shape)).float()
        if SignSTE.mode == "counter":  # a backward that keeps a count on its context (put back between calls)
            ctx.calls = getattr(ctx, "calls", 0) + 1
            return grad * (x.abs() <= 1) * ctx.calls
        return grad * (x.abs() <= 1)


class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(x, lam):
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.lam = inputs[1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return -ctx.lam * grad, None


class TernaryLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) * n_in ** -0.5)
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.w_p = nn.Parameter(torch.ones(1) * 0.1)
        self.w_n = nn.Parameter(torch.ones(1) * 0.1)

    def forward(self, x):
        return F.linear(x, Ternarize.apply(self.weight, self.w_p, self.w_n), self.bias)


class BinaryNet(nn.Module):
    def __init__(self, reverse: bool = False):
        super().__init__()
        self.inp = nn.Linear(64, 64)
        self.out = nn.Linear(64, 10)
        self.reverse = reverse

    def forward(self, x):
        h = SignSTE.apply(self.inp(x))
        if self.reverse:
            h = Reverse.apply(Reverse.apply(h, 1.0), 1.0)
        return self.out(h)


def _train(model: nn.Module, guard: bool, steps: int = 8):
    def run():
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    if guard:
        findings, text = guarded_run(run, check_every=2)
    else:
        run()
        findings, text = [], ""
    state = torch.cat([v.float().flatten() for v in model.state_dict().values()])
    return findings, text, state


def _ternary(bug: bool):
    Ternarize.bug = bug
    torch.manual_seed(0)
    try:
        return _train(nn.Sequential(TernaryLinear(64, 64), nn.ReLU(), TernaryLinear(64, 10)), True)
    finally:
        Ternarize.bug = False


def _binary(mode: str, guard: bool = True, reverse: bool = False):
    SignSTE.mode = mode
    torch.manual_seed(0)
    np.random.seed(0)
    try:
        return _train(BinaryNet(reverse), guard)
    finally:
        SignSTE.mode = "clip"


def test_latent_weight_gradient_built_from_the_weights_is_reported_at_its_line():
    findings, text, _ = _ternary(True)
    assert slugs(findings) == ["custom-backward-not-linear"]
    f = findings[0]
    line = next(i for i, s in enumerate(open(__file__).read().splitlines(), 1) if "w_grad = a * g * w_p" in s)
    assert f.where.startswith("Ternarize.backward at ") and f.where.endswith(f"test_gradinv.py:{line}"), f.where
    assert "`w`" in f.message and "`w_p`" not in f.message and "incoming gradient" in f.fix


def test_ternary_twin_built_from_the_gradient_is_silent():
    findings, _, _ = _ternary(False)
    assert "custom-backward-not-linear" not in slugs(findings)


def test_straight_through_that_returns_ones_is_reported():
    findings, _, _ = _binary("ones")
    assert "custom-backward-not-linear" in slugs(findings)
    assert "SignSTE" in next(f for f in findings if f.slug == "custom-backward-not-linear").message


def test_weight_decay_folded_into_backward_is_reported():
    findings, _, _ = _binary("decay")
    assert "custom-backward-not-linear" in slugs(findings)


def test_correct_custom_backwards_near_the_premise_are_silent():
    # straight-through with clipping, gradient reversal (setup_context style, once_differentiable), twice; the
    # incoming gradient clipped by its norm (odd, not linear); noise drawn in backward (torch, numpy); a count kept on
    # the context
    for mode, reverse in (("clip", True), ("normclip", False), ("noise", False), ("npnoise", False),
                          ("counter", False)):
        findings, _, _ = _binary(mode, reverse=reverse)
        assert "custom-backward-not-linear" not in slugs(findings), (mode, findings)


def test_the_probe_leaves_the_numbers_unchanged():
    # a backward that draws random numbers too: the random state is put back
    for mode in ("clip", "noise", "npnoise"):
        _, _, guarded = _binary(mode, guard=True)
        _, _, plain = _binary(mode, guard=False)
        assert torch.equal(guarded, plain), mode


def test_an_apply_taken_before_the_session_is_probed_on_checked_steps_only():
    calls = []

    class Ones(torch.autograd.Function):  # a straight-through estimator that returns ones (the bug)
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sign(x)

        @staticmethod
        def backward(ctx, grad):
            calls.append(1)
            return torch.ones_like(ctx.saved_tensors[0])

    binarize = Ones.apply  # taken before the session starts
    torch.manual_seed(0)
    inp, out = nn.Linear(64, 32), nn.Linear(32, 10)
    model = nn.Sequential(inp, out)

    def run():
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for xb, yb in batches(32, 40):
            loss = F.cross_entropy(out(binarize(inp(xb))), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    findings, _ = guarded_run(run, check_every=10)
    assert "custom-backward-not-linear" in slugs(findings)
    assert 40 < len(calls) <= 40 + 2 * 2  # one node probed (twice) per checked step, until the finding


class Recompute(torch.autograd.Function):
    """A hand-written reentrant checkpoint whose backward backpropagates through its recomputed block (never
    probed: run again it would accumulate into the block's .grad) -- and with a planted bug in its input
    gradient, to show it is the autograd call, not the result, that keeps the probe off."""

    @staticmethod
    def forward(ctx, block, x):
        ctx.block = block
        ctx.save_for_backward(x)
        with torch.no_grad():
            return block(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.block(x)
        torch.autograd.backward(out, grad)
        return None, x.grad + 1e-3 * x


def test_a_backward_that_runs_autograd_itself_is_never_probed():
    torch.manual_seed(0)
    inp, block, out = nn.Linear(64, 32), nn.Sequential(nn.Linear(32, 32), nn.Tanh()), nn.Linear(32, 10)
    model = nn.ModuleDict({"inp": inp, "block": block, "out": out})

    def run():
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for xb, yb in batches(32, 8):
            loss = F.cross_entropy(out(Recompute.apply(block, inp(xb))), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    findings, _ = guarded_run(run, check_every=2)
    assert "custom-backward-not-linear" not in slugs(findings)
    assert gradinv._runs_autograd(Recompute.backward.__code__)
