"""loss-config-overwritten (overt/guards/lossconfig.py, issue 33, session 50): a loss module whose per-class
configuration is rebound during its call to one batch's per-sample values. Named: a focal loss that assigns the
weights it gathered by label back to its ``alpha`` (a plain tensor attribute, and a buffer), a centre loss that
assigns the batch's gathered centres to its per-class centres. Quiet: the same losses keeping the gathered values
local, a loss that keeps an EMA centre of its inputs (a state of fixed shape), a loss that records the last batch's
per-sample weights in an attribute of its own, a loss that caches a per-batch tensor rebuilt when the batch size
changes, per-class weights expanded to the batch's shape, a batch with as many rows as classes. Small real runs on
the digits, found as ``overt run`` finds models."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs

SLUG = "loss-config-overwritten"


class FocalLoss(nn.Module):
    def __init__(self, overwrite, buffer=False):
        super().__init__()
        alpha = torch.linspace(0.5, 1.5, 10)
        if buffer:
            self.register_buffer("alpha", alpha)
        else:
            self.alpha = alpha
        self.overwrite = overwrite

    def forward(self, logits, labels):
        logp = F.log_softmax(logits, 1).gather(1, labels.view(-1, 1)).squeeze(1)
        if self.overwrite:
            self.alpha = self.alpha.gather(0, labels.view(-1))
            alpha = self.alpha
        else:
            alpha = self.alpha.gather(0, labels.view(-1))
        return -(alpha * (1 - logp.exp()) ** 2 * logp).mean()


class CenterLoss(nn.Module):
    """Cross-entropy plus a pull of each feature (here the logits) toward its class centre."""

    def __init__(self, overwrite):
        super().__init__()
        self.centers = torch.randn(10, 10)
        self.overwrite = overwrite

    def forward(self, logits, labels):
        if self.overwrite:
            self.centers = self.centers[labels]
            pulled = self.centers
        else:
            pulled = self.centers[labels]
        return F.cross_entropy(logits, labels) + 0.01 * ((logits - pulled) ** 2).sum(1).mean()


class ExpandedLoss(nn.Module):
    """Per-class weights broadcast to the batch's shape and kept (every row still holds every class's weight)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.linspace(0.5, 1.5, 10)

    def forward(self, logits, labels):
        if self.weight.dim() == 1:
            self.weight = self.weight.expand(logits.shape[0], 10)
        return -(self.weight[: logits.shape[0]] * F.one_hot(labels, 10) * F.log_softmax(logits, 1)).sum(1).mean()


class CentredLoss(nn.Module):
    """A DINO-like centre of the logits, updated by EMA on every call (shape kept)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("center", torch.zeros(1, 10))

    def forward(self, logits, labels):
        loss = F.cross_entropy(logits - self.center, labels)
        self.center = 0.9 * self.center + 0.1 * logits.detach().mean(0, keepdim=True)
        return loss


class RecordingLoss(nn.Module):
    """Keeps the last batch's per-sample weights for logging (an attribute of its own, not the weights)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.linspace(0.5, 1.5, 10)
        self.last = torch.zeros(10)

    def forward(self, logits, labels):
        self.last = self.weight[labels]
        return (self.last * F.cross_entropy(logits, labels, reduction="none")).mean()


class CachedLoss(nn.Module):
    """A per-row tensor built for a configured batch size and rebuilt when the batch differs."""

    def __init__(self):
        super().__init__()
        self.ones = torch.ones(256)

    def forward(self, logits, labels):
        if self.ones.shape[0] != logits.shape[0]:
            self.ones = torch.ones(logits.shape[0])
        return (self.ones * F.cross_entropy(logits, labels, reduction="none")).mean()


def _run(loss_fn, steps=40, batch=64):
    x, y = digits()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train():
        g = torch.Generator().manual_seed(0)
        for _ in range(steps):
            i = torch.randint(0, 1200, (batch,), generator=g)
            loss = loss_fn(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train, check_every=5)


def test_alpha_overwritten_named():
    findings, text = _run(FocalLoss(True))
    assert SLUG in slugs(findings), text
    f = next(f for f in findings if f.slug == SLUG)
    assert "FocalLoss" in f.message and "self.alpha" in f.message and f.fix
    assert "test_lossconfig.py" in f.where
    line = int(f.where.rsplit(":", 1)[1])
    import inspect
    src, start = inspect.getsourcelines(FocalLoss.forward)
    assert "self.alpha = self.alpha.gather" in src[line - start]


def test_alpha_buffer_overwritten_named():
    findings, text = _run(FocalLoss(True, buffer=True))
    assert SLUG in slugs(findings), text


def test_class_centres_overwritten_named():
    findings, text = _run(CenterLoss(True))
    assert SLUG in slugs(findings), text
    assert "10 rows" in next(f for f in findings if f.slug == SLUG).message


def test_kept_quiet():
    for loss in (FocalLoss(False), CenterLoss(False)):
        findings, text = _run(loss)
        assert SLUG not in slugs(findings), (type(loss).__name__, text)


def test_states_and_records_quiet():
    for loss in (CentredLoss(), RecordingLoss(), CachedLoss(), ExpandedLoss()):
        findings, text = _run(loss)
        assert SLUG not in slugs(findings), (type(loss).__name__, text)


def test_as_many_rows_as_classes_quiet():
    findings, text = _run(FocalLoss(True), batch=10)
    assert SLUG not in slugs(findings), text
