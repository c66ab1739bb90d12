"""Legitimate patterns that look like bugs to a naive checker stay quiet."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .helpers import batches, evaluate, guarded, mlp


def test_gradient_accumulation_is_quiet():
    model = mlp(dropout=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=2)
    accumulate = 4
    opt.zero_grad()
    for i, (xb, yb) in enumerate(batches(16, 40)):
        loss = F.cross_entropy(model(xb), yb) / accumulate
        loss.backward()
        if (i + 1) % accumulate == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
    assert g.report() == []


def test_grad_scaler_with_unscale_and_clipping_is_quiet():
    model = mlp(bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    g = guarded(model, opt, check_every=2)
    for xb, yb in batches(32, 12):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xb), yb)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
    assert g.report() == []


class _Finetune(nn.Module):
    def __init__(self, freeze_flag: bool):
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.head = nn.Linear(32, 10)
        if freeze_flag:
            self.backbone.requires_grad_(False)
        self.freeze_flag = freeze_flag

    def forward(self, x):
        if self.freeze_flag:
            return self.head(self.backbone(x))
        with torch.no_grad():
            feats = self.backbone(x)
        return self.head(feats)


def test_frozen_backbone_not_in_the_optimizer_is_quiet():
    for freeze_flag in (True, False):
        model = _Finetune(freeze_flag)
        opt = torch.optim.Adam(model.head.parameters(), lr=1e-3)
        g = guarded(model, opt)
        for xb, yb in batches(32, 8):
            model.train()
            model.backbone.eval()  # frozen BatchNorm statistics, on purpose
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        evaluate(model)
        assert g.report() == [], freeze_flag


def test_optimizer_over_all_params_with_frozen_backbone_is_quiet():
    model = _Finetune(freeze_flag=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # frozen ones are skipped by PyTorch
    g = guarded(model, opt)
    for xb, yb in batches(32, 8):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert g.report() == []


def test_ema_teacher_under_no_grad_is_quiet():
    student = mlp(dropout=0.2, bn=True)
    teacher = copy.deepcopy(student)  # parameters still require grad; never in an optimizer
    teacher.eval()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    g = guarded([student, teacher], opt)
    for xb, yb in batches(32, 12):
        with torch.no_grad():
            soft = teacher(xb).softmax(1)
        out = student(xb)
        loss = F.cross_entropy(out, yb) + F.kl_div(out.log_softmax(1), soft, reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pt, ps in zip(teacher.parameters(), student.parameters()):
                pt.mul_(0.99).add_(ps, alpha=0.01)
            # the BatchNorm statistics follow the student's (timm's ModelEma copies buffers too): an EMA of the
            # parameters alone would leave the eval-mode teacher normalising with the initial mean 0 and
            # variance 1 (running-stats-never-computed, a true finding)
            for bt, bs in zip(teacher.buffers(), student.buffers()):
                bt.copy_(bs)
    evaluate(student)
    assert g.report() == []


def test_gan_with_two_optimizers_is_quiet():
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.Sigmoid())
    disc = nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Dropout(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
    g = guarded([gen, disc], [opt_g, opt_d], check_every=2)
    ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
    for real, _ in batches(32, 12):
        z = torch.randn(32, 16)
        with torch.no_grad():
            fake_for_d = gen(z)  # generator in train mode under no_grad, once per step
        opt_d.zero_grad()
        d_loss = F.binary_cross_entropy_with_logits(disc(real), ones) + \
            F.binary_cross_entropy_with_logits(disc(fake_for_d), zeros)
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        fake = gen(z)
        g_loss = F.binary_cross_entropy_with_logits(disc(fake), ones)
        g_loss.backward()  # also fills disc's grads: reset by opt_d.zero_grad() next step
        opt_g.step()
    assert g.report() == []
