"""backward-discarded (issue 33, the wild corpus's w379): gradients a backward wrote that a reset erases before
any optimizer step used them.  Planted on digits: gradient accumulation that steps only when 800 samples are in
and leaves each epoch's remainder to the next epoch's ``zero_grad()`` (torchseq#8), under ``overt.guard`` and
under a session that finds models and optimizers itself, with ``Optimizer.zero_grad`` and with
``Module.zero_grad(set_to_none=False)``; twins that step on the remainder.  Silent: a GAN whose generator
backward writes into the discriminator's gradients (the same line backwards both), a Fisher probe backward at
another line, SAM's first pass, LBFGS's closure, a step skipped on purpose after a non-finite loss, the first
reset before any step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded, guarded_run, slugs

SLUG = "backward-discarded"


def _accumulate(model, opt, remainder: bool, epochs: int = 6, reset=None):
    """Accumulate per-sample-summed losses until 800 samples, then step; ``remainder``: also step on what is
    left at the end of an epoch (the fix)."""
    x, y = digits()
    x, y = x[:1300], y[:1300]
    reset = reset or opt.zero_grad
    g = torch.Generator().manual_seed(0)
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=g)
        reset()
        since = 0
        for i in range(0, len(order), 64):
            j = order[i:i + 64]
            loss = F.cross_entropy(model(x[j]), y[j], reduction="sum") / 800
            loss.backward()
            since += len(j)
            if since >= 800:
                opt.step()
                opt.zero_grad()
                since = 0
        if remainder and since:
            opt.step()
            opt.zero_grad()


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def test_an_epochs_remainder_reset_by_the_next_epochs_zero_grad_is_named():
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    with guarded(model, opt) as g:
        _accumulate(model, opt, remainder=False)
    found = [f for f in g.findings if f.slug == SLUG]
    assert found, slugs(g.findings)
    msg = found[0].message
    assert "SGD#0.zero_grad() at" in msg and "backward() calls at" in msg and "test_wasted_grad.py" in msg
    assert "step on the gradients before resetting them" in found[0].fix


def test_the_twin_that_steps_on_the_remainder_is_silent():
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    with guarded(model, opt) as g:
        _accumulate(model, opt, remainder=True)
    assert SLUG not in slugs(g.findings)


def test_module_zero_grad_in_place_under_a_session_that_finds_the_optimizer():
    model = _mlp()

    def bug():
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        _accumulate(model, opt, remainder=False, reset=lambda: model.zero_grad(set_to_none=False))

    findings, _ = guarded_run(bug)
    assert SLUG in slugs(findings)

    model = _mlp()

    def twin():
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        _accumulate(model, opt, remainder=True, reset=lambda: model.zero_grad(set_to_none=False))

    findings, _ = guarded_run(twin)
    assert SLUG not in slugs(findings)


def test_a_gan_whose_generator_backward_fills_the_discriminators_gradients_is_silent():
    torch.manual_seed(0)
    x, _ = digits()
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64), nn.Sigmoid())
    disc = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    d_opt = torch.optim.Adam(disc.parameters(), lr=1e-3)
    g_opt = torch.optim.Adam(gen.parameters(), lr=1e-3)

    def d_loss(real, fake):
        return F.binary_cross_entropy_with_logits(disc(real), torch.ones(len(real), 1)) + \
            F.binary_cross_entropy_with_logits(disc(fake.detach()), torch.zeros(len(fake), 1))

    def g_loss(fake):  # not detached: its backward also writes the discriminator's gradients
        return F.binary_cross_entropy_with_logits(disc(fake), torch.ones(len(fake), 1))

    def train():
        for i in range(0, 1280, 32):
            real = x[i:i + 32]
            fake = gen(torch.randn(32, 8))
            for opt, loss in ((d_opt, lambda: d_loss(real, fake)), (g_opt, lambda: g_loss(fake))):
                opt.zero_grad()
                loss().backward()  # one line backwards both losses
                opt.step()

    findings, _ = guarded_run(train)
    assert SLUG not in slugs(findings)


def test_a_fisher_probe_and_sams_first_pass_at_other_lines_are_silent():
    x, y = digits()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fisher = [torch.zeros_like(p) for p in model.parameters()]

    def train():
        for step, i in enumerate(range(0, 1280, 32)):
            xb, yb = x[i:i + 32], y[i:i + 32]
            if step % 3 == 0:  # EWC's Fisher: a probe backward, read, then reset
                F.cross_entropy(model(xb), yb).backward()
                for f, p in zip(fisher, model.parameters()):
                    f += p.grad ** 2
                opt.zero_grad()
            # SAM: the first pass's gradients move the weights to the worst point nearby, then are reset
            F.cross_entropy(model(xb), yb).backward()
            with torch.no_grad():
                eps = [0.05 * p.grad / (p.grad.norm() + 1e-12) for p in model.parameters()]
                for p, e in zip(model.parameters(), eps):
                    p.add_(e)
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            with torch.no_grad():
                for p, e in zip(model.parameters(), eps):
                    p.sub_(e)
            opt.step()
            opt.zero_grad()

    findings, _ = guarded_run(train)
    assert SLUG not in slugs(findings)


def test_lbfgs_closure_a_non_finite_skip_and_a_first_reset_are_silent():
    x, y = digits()
    model = _mlp()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)

    def lbfgs():
        for i in range(0, 640, 64):
            def closure():
                opt.zero_grad()
                loss = F.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
                loss.backward()
                return loss
            opt.step(closure)

    findings, _ = guarded_run(lbfgs)
    assert SLUG not in slugs(findings)

    model = _mlp()
    opt2 = torch.optim.SGD(model.parameters(), lr=0.1)

    def skip():
        opt2.zero_grad()
        for step, i in enumerate(range(0, 1280, 32)):
            scale = float("inf") if step % 4 == 2 else 1.0
            loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]) * scale
            loss.backward()
            if not torch.isfinite(loss):  # a bad batch: its gradients are dropped on purpose
                opt2.zero_grad()
                continue
            opt2.step()
            opt2.zero_grad()

    findings, _ = guarded_run(skip)
    assert SLUG not in slugs(findings)


def test_a_reset_before_every_micro_batch_of_an_accumulation_window_is_named():
    x, y = digits()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with guarded(model, opt) as g:
        for i, start in enumerate(range(0, 1280, 32)):
            model.zero_grad()  # bad: each micro-batch erases the one before it
            F.cross_entropy(model(x[start:start + 32]), y[start:start + 32]).backward()
            if (i + 1) % 4 == 0:
                opt.step()
    assert SLUG in slugs(g.findings)
