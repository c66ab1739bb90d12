"""loss-terms-misscaled (overt/guards/termscale.py, issue 33): the terms of a summed loss weighted against
each other by how they were reduced, not by the objective.  A term averaged over the batch next to one
summed over it is named in the forms it is written (a VAE with ``F.mse_loss`` and a KL summed with
``torch.sum``, ``nn.CrossEntropyLoss`` next to a feature term summed with ``.sum()``, a regression head
with ``reduction="sum"`` next to a classification head averaged, under one overall ``/ len(x)``); a
distillation term at temperature T without T² is named with ``F.kl_div`` (``batchmean``), with
``nn.KLDivLoss`` on ``logits * (1 / T)`` and with a soft cross-entropy written out.  Their twins stay
quiet: both terms reduced alike, a summed term divided by the batch size or given a small weight, a KL
weight at 0 (warm-up), a distillation term with T², a temperature of 1, soft targets alone.  Small real
runs on the digits, found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, guarded_fit, markov_tokens, slugs

SLUG = "loss-terms-misscaled"


def _run(step, models, steps: int = 45) -> list:
    """Train ``models`` (built by the caller under seed 0) with ``step(xb, yb)`` returning the loss."""
    return guarded_fit([p for m in models for p in m.parameters()], (step(xb, yb) for xb, yb in batches(64, steps)))


class _VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


def _vae(form: str) -> list:
    torch.manual_seed(0)
    vae = _VAE()
    mse = nn.MSELoss(reduction="sum") if form in ("sum-sum", "sum-mean") else nn.MSELoss()

    def step(x, _):
        recon, mu, logvar = vae(x)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        if form == "mean-sum":  # the bug: averaged reconstruction, summed KL, one overall division
            return (mse(recon, x) + kl) / len(x)
        if form == "sum-mean":  # the other way round: summed reconstruction, KL averaged over every element
            return mse(recon, x) + -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        if form == "sum-sum":  # pytorch/examples' VAE, divided by the batch
            return (mse(recon, x) + kl) / len(x)
        if form == "compensated":  # the KL divided by the batch size: both per sample
            return mse(recon, x) + kl / len(x)
        if form == "warmup":  # KL warm-up at its start: weight 0
            return mse(recon, x) + 0.0 * kl
        return mse(recon, x) + 1e-3 * kl  # "small": a weight the user chose

    return _run(step, [vae])


def test_vae_reconstruction_averaged_kl_summed_is_named():
    found = [f for f in _vae("mean-sum") if f.slug == SLUG]
    assert len(found) == 1, found
    msg = found[0].message
    assert "F.mse_loss" in msg and "reduction='mean' over a 64x64 tensor" in msg and "a sum over a 64x8" in msg
    assert "32 times more" in msg and "test_termscale.py" in found[0].where


def test_vae_reconstruction_summed_kl_averaged_is_named():
    found = [f for f in _vae("sum-mean") if f.slug == SLUG]
    assert len(found) == 1 and "reduction='sum' over a 64x64 tensor" in found[0].message, found


@pytest.mark.parametrize("form", ["sum-sum", "compensated", "warmup", "small"])
def test_vae_reduced_alike_or_weighted_is_quiet(form):
    assert SLUG not in slugs(_vae(form))


def _multitask(form: str) -> list:
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
    cls, reg = nn.Linear(64, 10), nn.Linear(64, 1)
    ce = nn.CrossEntropyLoss()

    def step(x, y):
        h = trunk(x)
        target = x.mean(1, keepdim=True)  # a second task: the image's brightness
        if form == "feature-sum":  # a feature penalty summed over the batch with .sum(), next to a mean CE
            return ce(cls(h), y) + 0.5 * h.pow(2).sum()
        if form == "soft-label-sum":  # the same penalty next to a cross-entropy on smoothed label probabilities
            return F.cross_entropy(cls(h), F.one_hot(y, 10).float() * 0.9 + 0.01) + 0.5 * h.pow(2).sum()
        if form == "feature-mean":
            return ce(cls(h), y) + 0.5 * h.pow(2).sum(1).mean()
        if form == "reg-sum":  # the regression head summed, the classification head averaged
            return (F.cross_entropy(cls(h), y) + F.l1_loss(reg(h), target, reduction="sum")) / len(x)
        if form == "both-sum":
            return (F.cross_entropy(cls(h), y, reduction="sum") + F.l1_loss(reg(h), target, reduction="sum")) / len(x)
        n = len(x)  # "mean-scaled": both averaged, scaled up and down by the batch size alike
        return (F.cross_entropy(cls(h), y) * n + F.l1_loss(reg(h), target) * n) / n

    return _run(step, [trunk, cls, reg])


@pytest.mark.parametrize("form", ["feature-sum", "soft-label-sum", "reg-sum"])
def test_multitask_term_summed_next_to_averaged_is_named(form):
    found = [f for f in _multitask(form) if f.slug == SLUG]
    assert len(found) == 1, found
    assert "64 rows" in found[0].message


@pytest.mark.parametrize("form", ["feature-mean", "both-sum", "mean-scaled"])
def test_multitask_reduced_alike_is_quiet(form):
    assert SLUG not in slugs(_multitask(form))


def test_summed_terms_on_disjoint_parameters_are_quiet():
    """Two heads with no parameter in common: their relative scale does not decide anything shared."""
    torch.manual_seed(0)
    a, b = nn.Linear(64, 10), nn.Linear(64, 1)

    def step(x, y):
        return F.cross_entropy(a(x), y) + F.l1_loss(b(x), x.mean(1, keepdim=True), reduction="sum")

    findings = _run(step, [a, b])
    assert SLUG not in slugs(findings)


def _distil(form: str, T: float = 6.0) -> list:
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    for p in teacher.parameters():
        p.requires_grad_(False)
    kl = nn.KLDivLoss(reduction="batchmean")

    def step(x, y):
        z = student(x)
        with torch.no_grad():
            soft = F.softmax(teacher(x) / T, dim=1)
        if form in ("kl", "kl-t2", "soft-only"):
            term = F.kl_div(F.log_softmax(z / T, dim=1), soft, reduction="batchmean")
        elif form in ("module", "module-t2"):
            term = kl(torch.log_softmax(z * (1.0 / T), dim=1), soft)
        else:  # a soft cross-entropy written out
            term = -(soft * F.log_softmax(z / T, dim=1)).sum(1).mean()
        if form == "soft-only":
            return term
        if form.endswith("-t2"):
            term = term * T * T
        return 0.9 * term + 0.1 * F.cross_entropy(z, y)

    return _run(step, [student])


@pytest.mark.parametrize("form", ["kl", "module", "soft-ce"])
def test_distillation_without_t_squared_is_named(form):
    found = [f for f in _distil(form) if f.slug == SLUG]
    assert len(found) == 1, found
    assert "T = 6" in found[0].message and "T² = 36" in found[0].message


@pytest.mark.parametrize("form", ["kl-t2", "module-t2", "soft-ce-t2", "soft-only"])
def test_distillation_with_t_squared_or_alone_is_quiet(form):
    assert SLUG not in slugs(_distil(form))


def _token_distil(t_squared: bool) -> list:
    """Token-level distillation of a next-token model: (N, L, V) logits flattened in both terms."""
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Embedding(8, 32), nn.ReLU(), nn.Linear(32, 8))
    student = nn.Sequential(nn.Embedding(8, 16), nn.ReLU(), nn.Linear(16, 8))
    for p in teacher.parameters():
        p.requires_grad_(False)
    seq = markov_tokens(512, seed=1)
    T = 4.0

    def losses():
        for i in range(40):
            xb = seq[(i * 32) % 480:(i * 32) % 480 + 32]
            inp, tgt = xb[:, :-1], xb[:, 1:]
            z = student(inp)
            with torch.no_grad():
                soft = F.softmax(teacher(inp).reshape(-1, 8) / T, dim=-1)
            kd = F.kl_div(F.log_softmax(z.reshape(-1, 8) / T, dim=-1), soft, reduction="batchmean")
            yield 0.5 * kd * (T * T if t_squared else 1.0) + 0.5 * F.cross_entropy(z.reshape(-1, 8), tgt.reshape(-1))

    return guarded_fit(student.parameters(), losses(), lr=3e-3)


def test_token_level_distillation_without_t_squared_is_named():
    found = [f for f in _token_distil(False) if f.slug == SLUG]
    assert len(found) == 1 and "T = 4" in found[0].message, found


def test_token_level_distillation_with_t_squared_is_quiet():
    assert SLUG not in slugs(_token_distil(True))


def test_distillation_at_temperature_one_is_quiet():
    assert SLUG not in slugs(_distil("kl", T=1.0))


def test_backward_is_the_original_between_checked_steps():
    """The wrapper of torch.autograd.backward is in place only while a checked step lasts."""
    from overt.guards import termscale

    original = torch.autograd.backward
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=10), auto=True)
    seen = []
    try:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for xb, yb in batches(32, 30):
            seen.append((session.armed, torch.autograd.backward is original))
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            opt.zero_grad()
    finally:
        session.close()
    assert torch.autograd.backward is original
    assert termscale._ORIG is None
    assert all(plain != armed for armed, plain in seen), seen


def _multiterm(form: str) -> list:
    """Multi-term losses of common recipes, each term reduced as its authors meant."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4 * 14))

    def step(x, y):
        out = net(x).view(len(x), 4, 14)  # 4 "queries" per image: 10 class logits and 4 box numbers each
        logits, boxes = out[..., :10].reshape(-1, 10), out[..., 10:].reshape(-1, 4)
        labels = y.repeat_interleave(4)
        target_boxes = x[:, :16].reshape(-1, 4)
        if form == "detection":  # a matching loss: class CE averaged, box L1 summed over the boxes / their number
            num_boxes = torch.as_tensor(float(len(target_boxes)))
            return F.cross_entropy(logits, labels) + 5.0 * F.l1_loss(boxes, target_boxes, reduction="sum") / num_boxes
        if form == "multibox":  # both summed, divided by the number of positive matches
            pos = labels >= 5
            num_pos = pos.sum().clamp(min=1)
            loss_l = F.smooth_l1_loss(boxes[pos], target_boxes[pos], reduction="sum")
            loss_c = F.cross_entropy(logits, labels, reduction="sum")
            return (loss_l + loss_c) / num_pos
        # "actor-critic": policy, value and entropy terms, each averaged
        dist = torch.distributions.Categorical(logits=logits)
        actions = dist.sample()
        advantage = (labels == actions).float() - 0.1
        value = boxes[:, 0]
        return (-(dist.log_prob(actions) * advantage).mean() + 0.5 * F.mse_loss(value, advantage)
                - 0.01 * dist.entropy().mean())

    return _run(step, [net])


@pytest.mark.parametrize("form", ["detection", "multibox", "actor-critic"])
def test_multi_term_losses_reduced_as_meant_are_quiet(form):
    assert SLUG not in slugs(_multiterm(form))


# -- a mean over the batch divided by the batch size again (branch losses12) ---------------------------------
def _twice(form: str) -> list:
    """A classifier on the digits whose loss adds an L2 penalty on the batch's features (PyG's BPR loss's
    regulariser, the norm of the batch's embeddings), divided by the batch size in the forms it is written."""
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
    head = nn.Linear(32, 10)
    model = nn.Sequential(body, head)

    def step(x, y):
        feats = body(x)
        out = head(feats)
        ce = F.cross_entropy(out, y)
        n = len(x)
        if form == "twice":  # the bug: the averaged term divided by n once more with the penalty
            return (ce + 1e-3 * feats.pow(2).sum()) / n
        if form == "twice-norm":  # the penalty a squared norm over two per-sample tensors concatenated (2n rows)
            return (ce + 1e-4 * torch.cat([feats, body(x.flip(1))]).norm(p=2).pow(2)) / n
        if form == "once":  # the fix: only the summed penalty divided by n
            return ce + 1e-3 * feats.pow(2).sum() / n
        if form == "weights":  # both over n, but the penalty is on the parameters: not a term over the batch
            return (ce + 1e-4 * sum(p.norm(p=2).pow(2) for p in model.parameters())) / n
        return (ce + 1e-3 * feats.pow(2).sum(1).mean()) / n  # "both": every term divided alike (accumulation)

    return _run(step, [model])


@pytest.mark.parametrize("form", ["twice", "twice-norm"])
def test_mean_divided_by_the_batch_again_is_named(form):
    found = [f for f in _twice(form) if f.slug == SLUG]
    assert len(found) == 1, found
    msg = found[0].message
    assert "by the batch size 64 again" in msg and "averaged over the batch twice" in msg, msg
    assert "F.cross_entropy" in msg and "test_termscale.py" in found[0].where


@pytest.mark.parametrize("form", ["once", "weights", "both"])
def test_mean_divided_once_is_silent(form):
    assert [f for f in _twice(form) if f.slug == SLUG] == []


def _divided(form: str) -> list:
    """A trunk shared by a classification head and an auxiliary regression head (session 55, w421): each term
    summed over the batch of 64 and divided by it once, except ``"twice"``, whose auxiliary per-sample values
    are divided by the batch size before their sum as well."""
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
    cls, reg = nn.Linear(32, 10), nn.Linear(32, 1)

    def step(x, y):
        h = trunk(x)
        n = len(x)
        main = F.cross_entropy(cls(h), y, reduction="none")
        aux = (reg(h) - x.mean(1, keepdim=True)) ** 2
        if form == "twice":
            aux = aux / n
        elif form == "half":  # a weight of 0.5 on each per-sample value: the user's
            aux = aux * 0.5
        return torch.sum(main) / n + torch.sum(aux) / n

    return _run(step, [trunk, cls, reg])


def test_term_divided_by_batch_before_and_after_its_sum_is_named():
    found = [f for f in _divided("twice") if f.slug == SLUG]
    assert len(found) == 1, found
    assert "by the batch size 64 twice" in found[0].message and "64 times less" in found[0].message


@pytest.mark.parametrize("form", ["once", "half"])
def test_terms_divided_once_each_are_quiet(form):
    assert SLUG not in slugs(_divided(form))
