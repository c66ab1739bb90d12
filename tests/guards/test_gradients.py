"""Gradients and the optimizer step: planted bugs are reported with their location; clean twins are quiet."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from overt.guards import GuardError

from tests.conftest import TIMING

from .helpers import batches, guarded, mlp, slugs, train


def test_stale_gradients_stops_before_the_second_step():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    before = None
    with pytest.raises(GuardError) as err:
        for i, (xb, yb) in enumerate(batches(32, 10)):
            loss = F.cross_entropy(model(xb), yb)  # no zero_grad anywhere
            loss.backward()
            if i == 1:
                before = [p.detach().clone() for p in model.parameters()]
            opt.step()
    findings = g.report()
    assert slugs(findings) == ["stale-gradients"]
    f = findings[0]
    assert f.step == 1 and f.code == "OVT101"
    assert "test_gradients.py" in f.where  # the user's own opt.step() line
    assert "0.weight" in f.message
    # stopped *before* the step: the weights are those from after step 1
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert "stale-gradients" in str(err.value)


def test_stale_gradients_clean_twins_quiet():
    for reset in ("optimizer", "model", "none_by_hand", "zero_false"):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt, check_every=2)
        for xb, yb in batches(32, 12):
            if reset == "optimizer":
                opt.zero_grad()
            elif reset == "model":
                model.zero_grad()
            elif reset == "none_by_hand":
                for p in model.parameters():
                    p.grad = None
            else:
                opt.zero_grad(set_to_none=False)
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        assert g.report() == [], reset


def test_zero_grad_between_backward_and_step():
    for set_to_none in (True, False):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt)
        for xb, yb in batches(32, 6):
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.zero_grad(set_to_none=set_to_none)  # misplaced: wipes the gradients
            opt.step()
        findings = g.report()
        assert "zero-grad-misplaced" in slugs(findings), set_to_none
        f = next(f for f in findings if f.slug == "zero-grad-misplaced")
        # set_to_none=False: all-zero gradients are judged once backward was watched resetting them
        # (the hooks are placed after a checked step), so from step 1; set_to_none=True at step 0
        assert f.step == (0 if set_to_none else 1) and "SGD#0" in f.where


def test_zero_grad_placed_right_is_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=8)
    assert g.report() == []


def test_params_not_optimized_layer_added_after_optimizer():
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.append(nn.ReLU())  # (a nonlinearity between: two Linear layers in a row are linear-layers-collapse)
    model.append(nn.Linear(10, 10))  # added after the optimizer was built
    g = guarded(model, opt)
    train(model, opt, steps=7)
    findings = g.report()
    assert slugs(findings) == ["params-not-optimized"]
    assert "Sequential.4.weight" in findings[0].message and "Sequential.4.bias" in findings[0].message


def test_params_not_optimized_all_frozen_optimizer():
    model = mlp()
    head = nn.Linear(10, 10)
    for p in head.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
    g = guarded([model, head], [opt, opt_head])
    for xb, yb in batches(32, 6):
        opt.zero_grad()
        F.cross_entropy(head(model(xb)), yb).backward()
        opt.step()
        opt_head.step()
    findings = g.report()
    assert "params-not-optimized" in slugs(findings)
    assert any("requires_grad=False" in f.message for f in findings)


def test_params_all_in_optimizer_is_quiet():
    model = mlp()
    model.append(nn.ReLU())
    model.append(nn.Linear(10, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # built after the model is complete
    g = guarded(model, opt)
    train(model, opt, steps=7)
    assert g.report() == []


class _Detached(nn.Module):
    def __init__(self, detach: bool):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(64, 32)
        self.head = nn.Linear(32, 10)
        self.detach = detach

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.head(h.detach() if self.detach else h)


def test_no_gradient_on_detached_path():
    model = _Detached(detach=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=7)
    findings = g.report()
    assert slugs(findings) == ["no-gradient"]
    assert "_Detached.body.weight" in findings[0].message and "head" not in findings[0].message


def test_no_gradient_clean_twin():
    model = _Detached(detach=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=7)
    assert g.report() == []


def test_params_not_updating_with_lr_zero():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    g = guarded(model, opt, check_every=5)
    train(model, opt, steps=12)
    findings = g.report()
    assert "params-not-updating" in slugs(findings)
    f = next(f for f in findings if f.slug == "params-not-updating")
    assert "lr = 0" in f.message and "SGD#0" in f.where


def test_a_fit_solved_exactly_is_not_params_not_updating():
    """A least-squares fit whose targets the model can reach exactly: once the loss is at its minimum the gradients
    are tiny and the updates round away, so the parameters stop moving; nothing is wrong (round six's w157 twin, a
    tabular Q-function solved exactly, was reported)."""
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([[0.5], [-1.0], [0.25], [2.0]]) + 0.75
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=50)
    for _ in range(400):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss) < 1e-10
    assert "params-not-updating" not in slugs(g.report()), g.session.options.stream.getvalue()


def test_params_updating_is_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = guarded(model, opt, check_every=5)
    train(model, opt, steps=12)
    assert g.report() == []


def test_a_step_that_moves_one_row_between_rows_put_back_is_quiet():
    """Textual inversion's pattern: an embedding of which the user keeps every row but one fixed by
    putting the rows back after each step; the strided sample of the weights sees only the rows put
    back, the tensor's sum sees the one that moved (wild case w100's twin)."""
    torch.manual_seed(0)
    embed = nn.EmbeddingBag(300, 16)
    head = nn.Linear(16, 10)
    model = nn.Sequential(embed, head)
    head.requires_grad_(False)
    opt = torch.optim.AdamW(embed.parameters(), lr=1e-2, weight_decay=0.5)
    keep = torch.ones(300, dtype=torch.bool)
    keep[299] = False
    orig = embed.weight.detach().clone()
    g = guarded(model, opt, check_every=5)
    tokens = torch.randint(300, (64, 6))
    tokens[:, 0] = 299
    for _ in range(12):
        opt.zero_grad()
        nn.functional.cross_entropy(model(tokens), torch.full((64,), 3)).backward()
        embed.weight.grad[keep] = 0  # "freeze" the other rows (their weight decay is undone below)
        opt.step()
        with torch.no_grad():
            embed.weight[keep] = orig[keep]
    assert g.report() == []


def test_non_finite_gradient_stops_before_the_step():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    with pytest.raises(GuardError):
        for i, (xb, yb) in enumerate(batches(32, 6)):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            if i == 2:
                loss = loss * torch.tensor(float("inf"))  # planted overflow
            loss.backward()
            opt.step()
    findings = g.report()
    assert "non-finite" in slugs(findings)
    f = next(f for f in findings if f.slug == "non-finite")
    assert f.step == 2
    assert all(torch.isfinite(p).all() for p in model.parameters())  # the weights were not touched


def test_non_finite_input_is_reported():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, stop_on_error=False)
    for i, (xb, yb) in enumerate(batches(32, 4)):
        if i == 1:
            xb = xb.clone()
            xb[3, 5] = float("nan")
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    findings = g.report()
    assert "non-finite" in slugs(findings)
    assert any("input 0 of Sequential" in f.message for f in findings)


def test_finite_training_is_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    train(model, opt, steps=10)
    assert g.report() == []


def _lbfgs_steps(model, opt, n, *, inf_at=None, zero_grad=True):
    """A real LBFGS loop: the closure makes the gradients inside opt.step(closure)."""
    for i, (xb, yb) in enumerate(batches(32, n)):
        def closure():
            if zero_grad:
                opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            if i == inf_at:
                loss = loss * torch.tensor(float("inf"))  # planted overflow at this step
            loss.backward()
            return loss

        opt.step(closure)


def test_a_closure_optimizer_is_checked_on_the_gradients_of_its_own_step():
    """LBFGS: the gradients exist only once step() has called the closure; the checks ran in the
    step's pre-hook on the previous step's gradients, so an overflow at step 2 was found at step 3,
    after LBFGS had written NaN into every weight.  Now: step 2, the weights untouched."""
    model = mlp()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    g = guarded(model, opt)
    with pytest.raises(GuardError):
        _lbfgs_steps(model, opt, 6, inf_at=2)
    f = next(f for f in g.report() if f.slug == "non-finite")
    assert f.step == 2 and "at step 2" in f.message
    assert all(torch.isfinite(p).all() for p in model.parameters())  # stopped before LBFGS used them


def test_a_closure_that_never_resets_the_gradients_is_stale_at_its_first_checked_step():
    model = mlp()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    g = guarded(model, opt, check_every=1, stop_on_error=False)
    _lbfgs_steps(model, opt, 3, zero_grad=False)
    stale = [f for f in g.report() if f.slug == "stale-gradients"]
    assert [f.step for f in stale] == [1]  # was never found: the checks saw the gradients before the closure


def test_a_clean_closure_optimizer_is_quiet_on_every_step():
    model = mlp()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    g = guarded(model, opt, check_every=1)
    _lbfgs_steps(model, opt, 10)
    assert g.report() == []


def _two_optimizer_run(detach: bool, order: str) -> list:
    """An encoder and a decoder with optimizers of their own, the decoder trained on the encoder's
    codes; ``detach`` cuts the encoder off the loss (the GAN generator step of image2reverb#37, in
    another form: a reconstruction whose encoder never learns)."""
    torch.manual_seed(0)
    enc, dec = nn.Sequential(nn.Linear(64, 16), nn.Tanh()), nn.Linear(16, 64)
    opt_enc = torch.optim.Adam(enc.parameters(), lr=1e-3)
    opt_dec = torch.optim.Adam(dec.parameters(), lr=1e-3)
    g = guarded(nn.ModuleDict({"enc": enc, "dec": dec}), opt_enc)
    g.session.watch_optimizer(opt_dec)
    for xb, _ in batches(32, 12):
        z = enc(xb)
        loss = F.mse_loss(dec(z.detach() if detach else z), xb)
        opt_enc.zero_grad()
        opt_dec.zero_grad()
        loss.backward()
        for opt in ((opt_enc, opt_dec) if order == "enc-first" else (opt_dec, opt_enc)):
            opt.step()
    return g.report()


@pytest.mark.parametrize("order", ["enc-first", "dec-first"])
def test_a_loss_cut_off_from_an_optimizers_parameters_is_no_gradient_not_a_misplaced_zero_grad(order):
    """The step is in its place; the loss has no path back to the encoder: the cause is the cut, named
    with the loss line, not zero-grad-misplaced."""
    findings = _two_optimizer_run(detach=True, order=order)
    assert "no-gradient" in slugs(findings) and "zero-grad-misplaced" not in slugs(findings)
    f = next(f for f in findings if f.slug == "no-gradient")
    assert "has no path back" in f.message and "mse_loss" in f.where


@pytest.mark.parametrize("order", ["enc-first", "dec-first"])
def test_an_encoder_trained_through_the_decoder_is_quiet(order):
    found = _two_optimizer_run(detach=False, order=order)
    assert [f.slug for f in found if f.slug not in TIMING] == [], [f.format() for f in found]


def test_a_gan_generator_step_on_detached_samples_names_the_cut():
    """A non-saturating GAN (BCE with logits) whose generator step scores fake.detach()."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    disc = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
    g = guarded(gen, opt_g)
    g.session.watch_model(disc)
    g.session.watch_optimizer(opt_d)
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
    for _ in range(12):
        real = torch.randn(64, 2) + 2
        fake = gen(torch.randn(64, 8))
        d_loss = F.binary_cross_entropy_with_logits(disc(real), ones) + \
            F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(disc(fake.detach()), ones)  # the bug
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
    found = g.report()
    assert "no-gradient" in slugs(found) and "zero-grad-misplaced" not in slugs(found)


def test_a_target_network_that_gets_gradients_is_not_params_not_optimized():
    """A DQN's target network (minimalRL's dqn.py): a copy of the trained network, refreshed with
    load_state_dict, through which the loss's target is computed without detach, so its parameters
    get gradients that no optimizer holds. It does change (by the copy), so "They never change"
    would be false: quiet. The same loop with a head no optimizer holds is still reported."""
    import copy

    for planted in (False, True):
        q = mlp()
        if planted:
            q.append(nn.Linear(10, 10))  # a head the optimizer below leaves out
        q_target = copy.deepcopy(q)
        trained = list(q.parameters())[:-2] if planted else list(q.parameters())
        opt = torch.optim.Adam(trained, lr=1e-3)
        g = guarded([q, q_target], opt)
        for i, (xb, yb) in enumerate(batches(32, 12)):
            target = 0.5 + 0.9 * q_target(xb).max(1).values  # no detach: gradients reach q_target
            loss = F.smooth_l1_loss(q(xb).gather(1, yb[:, None]).squeeze(1), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i % 5 == 4:
                q_target.load_state_dict(q.state_dict())
        found = slugs(g.report())
        assert ("params-not-optimized" in found) == planted, (planted, found)
