"""loss-rises-toward-target (overt/guards/lossdir.py, issue 33): a hand-written loss of binary labels whose gradient
does not move the two labels apart.  Named: a sigmoid focal loss whose negatives' factor is inverted (a loss
module, and the same written as a plain function and as a method of a plain class), a BCE whose positive term lost
its sign, a focal loss whose positives' factor is inverted, a negatives' term on log(p).  Quiet: the correct focal
loss, a hand-written BCE with label smoothing, MSE on 0/1 targets, a GAN generator scored with the real label only,
a contrastive loss on a distance output (the labels moved apart, in the other orientation), soft labels.  Small real
runs on the digits (is it a 3?), found as ``overt run`` finds models."""

from __future__ import annotations

import torch
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs

SLUG = "loss-rises-toward-target"


def _focal(logits, targets, inverted, gamma=2.0, alpha=0.25):
    p = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
    pos = -alpha * (1 - p) ** gamma * torch.log(p) * targets
    neg_factor = (1 - p) if inverted else p
    neg = -(1 - alpha) * neg_factor ** gamma * torch.log(1 - p) * (1 - targets)
    return (pos + neg).sum() / targets.sum().clamp(min=1)


class _FocalModule(nn.Module):
    def __init__(self, inverted):
        super().__init__()
        self.inverted = inverted

    def forward(self, logits, targets):
        return _focal(logits, targets, self.inverted)


class _FocalPlain:
    def __init__(self, inverted):
        self.inverted = inverted

    def __call__(self, logits, targets):
        return _focal(logits, targets, self.inverted)


def focal_loss_inverted(logits, targets):
    return _focal(logits, targets, True)


def focal_loss(logits, targets):
    return _focal(logits, targets, False)


def bce_positive_sign_lost(logits, y):
    p = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
    return (y * torch.log(p) - (1 - y) * torch.log(1 - p)).mean()


def focal_positives_inverted(logits, y, gamma=2.0):
    p = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
    return -(p ** gamma * torch.log(p) * y + p ** gamma * torch.log(1 - p) * (1 - y)).mean()


def bce_negatives_wrong_log(logits, y):
    p = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
    return -(y * torch.log(p) + (1 - y) * torch.log(p)).mean()


def bce_smoothed(logits, y, eps=0.1):
    y = y * (1 - eps) + 0.5 * eps
    p = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()


def mse_on_labels(out, y):
    return ((out - y) ** 2).mean()


def _run(loss_fn, steps=60, out_shift=0.0, soft=False):
    x, y = digits()
    y = (y == 3).float()
    if soft:
        y = y * 0.8 + 0.1
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    with torch.no_grad():
        model[2].bias.fill_(out_shift)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train():
        g = torch.Generator().manual_seed(0)
        for _ in range(steps):
            i = torch.randint(0, 1200, (128,), generator=g)
            loss = loss_fn(model(x[i]).squeeze(1), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()

    findings, text = guarded_run(train, check_every=5)
    return findings, text


def test_inverted_focal_module_named():
    findings, text = _run(_FocalModule(True))
    assert SLUG in slugs(findings), text
    f = next(f for f in findings if f.slug == SLUG)
    assert "_FocalModule" in f.message and "test_lossdir.py" in f.where and f.fix


def test_inverted_focal_function_named():
    findings, text = _run(focal_loss_inverted)
    assert SLUG in slugs(findings), text
    assert "focal_loss_inverted" in next(f for f in findings if f.slug == SLUG).message


def test_inverted_focal_plain_class_named():
    findings, text = _run(_FocalPlain(True))
    assert SLUG in slugs(findings), text


def test_positive_sign_lost_named():
    findings, text = _run(bce_positive_sign_lost, out_shift=-1.0)
    assert SLUG in slugs(findings), text


def test_other_broken_terms_named():
    for fn in (focal_positives_inverted, bce_negatives_wrong_log):
        findings, text = _run(fn)
        assert SLUG in slugs(findings), (fn, text)


def test_correct_losses_quiet():
    for fn in (_FocalModule(False), focal_loss, _FocalPlain(False), bce_smoothed, mse_on_labels):
        findings, text = _run(fn)
        assert SLUG not in slugs(findings), (fn, text)
    findings, text = _run(mse_on_labels, out_shift=2.0)
    assert SLUG not in slugs(findings), text
    findings, text = _run(mse_on_labels, out_shift=-2.0)
    assert SLUG not in slugs(findings), text


def test_soft_labels_quiet():
    findings, text = _run(focal_loss_inverted, soft=True)
    assert SLUG not in slugs(findings), text


def test_generator_with_real_label_quiet():
    """A GAN's generator step: every sample scored against the real label (one label: nothing to compare)."""
    x, _ = digits()
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64), nn.Sigmoid())
    disc = nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    og = torch.optim.Adam(gen.parameters(), lr=1e-3)
    od = torch.optim.Adam(disc.parameters(), lr=1e-3)

    def bce(logits, y):
        return nn.functional.binary_cross_entropy_with_logits(logits, y)

    def train():
        for s in range(40):
            real = x[(s * 64) % 1500:(s * 64) % 1500 + 64]
            fake = gen(torch.randn(64, 8))
            d_loss = bce(disc(real).squeeze(1), torch.ones(64)) + bce(disc(fake.detach()).squeeze(1), torch.zeros(64))
            od.zero_grad()
            d_loss.backward()
            od.step()
            g_loss = bce(disc(fake).squeeze(1), torch.ones(64))
            og.zero_grad()
            g_loss.backward()
            og.step()

    findings, text = guarded_run(train, check_every=5)
    assert SLUG not in slugs(findings), text


class _Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, a, b):
        return (self.emb(a) - self.emb(b)).pow(2).sum(1).add(1e-9).sqrt()


def contrastive(dist, same, margin=2.0):
    """Label 1: the same digit (pulled together), 0: different digits (pushed apart up to the margin)."""
    return (same * dist.pow(2) + (1 - same) * torch.clamp(margin - dist, min=0).pow(2)).mean()


def test_contrastive_distance_quiet():
    x, y = digits()
    torch.manual_seed(0)
    model = _Siamese()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train():
        g = torch.Generator().manual_seed(0)
        for _ in range(40):
            i = torch.randint(0, 1500, (128,), generator=g)
            j = torch.where(torch.rand(128, generator=g) < 0.5, i.roll(1), i)
            same = (y[i] == y[j]).float()
            loss = contrastive(model(x[i], x[j]), same)
            opt.zero_grad()
            loss.backward()
            opt.step()

    findings, text = guarded_run(train, check_every=5)
    assert SLUG not in slugs(findings), text
