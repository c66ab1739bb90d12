"""frozen-model-in-train-mode at run time (issue 33): a model kept fixed while another trains (a
distillation teacher, a frozen feature extractor) left in training mode, so its Dropout randomises
what it gives the training and its BatchNorm overwrites its running statistics.  Planted bugs in
two forms (a teacher frozen with ``requires_grad_(False)``; an encoder run under ``no_grad``
feeding a new head), their clean twins (``eval()``), and a BYOL-style EMA target network in
training mode, which the run moves on purpose."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import guarded_run, batches, slugs


def _net(hidden: int = 64, out: int = 10) -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(hidden, out))


def _pretrained() -> nn.Sequential:
    torch.manual_seed(0)
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for xb, yb in batches(64, 30):
        opt.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        opt.step()
    opt.zero_grad()
    return net


def _distill(bug: bool, steps: int = 40):
    teacher = _pretrained().requires_grad_(False)
    if not bug:
        teacher.eval()

    def train():
        student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        for xb, _ in batches(64, steps):
            soft = F.softmax(teacher(xb) / 4, dim=1)
            loss = F.kl_div(F.log_softmax(student(xb) / 4, dim=1), soft, reduction="batchmean") * 16
            opt.zero_grad()
            loss.backward()
            opt.step()
    return guarded_run(train)


def _frozen_encoder(bug: bool, steps: int = 40):
    encoder = _pretrained()[:3]
    if not bug:
        encoder.eval()

    def train():
        head = nn.Linear(64, 10)
        opt = torch.optim.Adam(head.parameters(), lr=1e-2)
        for xb, yb in batches(32, steps):
            with torch.no_grad():
                feats = encoder(xb)
            opt.zero_grad()
            F.cross_entropy(head(feats), yb).backward()
            opt.step()
    return guarded_run(train)


def test_a_teacher_frozen_by_requires_grad_in_train_mode_is_named_and_its_eval_twin_is_silent():
    findings, text = _distill(bug=True)
    assert slugs(findings) == ["frozen-model-in-train-mode"], text
    assert "test_frozen_model_mode.py:" in text and "Dropout" in text and "BatchNorm" in text
    findings, text = _distill(bug=False)
    assert findings == [], text


def test_a_frozen_encoder_under_no_grad_in_train_mode_is_named_and_its_eval_twin_is_silent():
    findings, text = _frozen_encoder(bug=True)
    assert "frozen-model-in-train-mode" in slugs(findings), text
    findings, text = _frozen_encoder(bug=False)
    assert findings == [], text


def test_an_ema_target_network_in_train_mode_is_silent():
    torch.manual_seed(0)

    def train():
        online = _net(out=32)
        target = copy.deepcopy(online).requires_grad_(False)
        opt = torch.optim.Adam(online.parameters(), lr=1e-3)
        for xb, _ in batches(64, 40):
            with torch.no_grad():
                z = target(xb + 0.1 * torch.randn_like(xb))
            loss = F.mse_loss(online(xb), z)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                for pt, po in zip(target.parameters(), online.parameters()):
                    pt.mul_(0.99).add_(po, alpha=0.01)
    findings, text = guarded_run(train)
    assert findings == [], text


def _two_views(bug: bool, steps: int = 40):
    """Distillation on two noisy views per batch: the teacher runs twice per step under no_grad."""
    teacher = _pretrained()
    if not bug:
        teacher.eval()

    def train():
        torch.manual_seed(1)
        student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        for xb, _ in batches(64, steps):
            loss = 0
            for view in (xb + 0.05 * torch.randn_like(xb), xb + 0.05 * torch.randn_like(xb)):
                with torch.no_grad():
                    soft = F.softmax(teacher(view) / 4, dim=1)
                loss = loss + F.kl_div(F.log_softmax(student(view) / 4, dim=1), soft, reduction="batchmean") * 16
            opt.zero_grad()
            loss.backward()
            opt.step()
    return guarded_run(train)


def test_a_teacher_run_twice_per_step_under_no_grad_is_named_once_by_its_cause():
    """Two no_grad forwards of the teacher in one step, then the student's optimizer step: a training-time use
    of a model no optimizer holds, not an evaluation, so train-mode-in-eval stays silent and
    frozen-model-in-train-mode names the cause.  Before, both were reported."""
    findings, text = _two_views(bug=True)
    assert slugs(findings) == ["frozen-model-in-train-mode"], text
    findings, text = _two_views(bug=False)
    assert findings == [], text


def test_a_model_no_optimizer_holds_evaluated_in_train_mode_at_the_end_is_still_named():
    """The teacher evaluated in training mode after the student's training (no optimizer step follows its
    forwards): an evaluation, train-mode-in-eval as before."""
    teacher = _pretrained()

    def train():
        student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        for xb, yb in batches(64, 10):
            opt.zero_grad()
            F.cross_entropy(student(xb), yb).backward()
            opt.step()
        with torch.no_grad():
            for xb, _ in batches(64, 3):
                teacher(xb)
    findings, text = guarded_run(train)
    assert slugs(findings) == ["train-mode-in-eval"], text
