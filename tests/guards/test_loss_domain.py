"""Every loss's input domain (``softmax-before-cross-entropy``): KL divergence's input must be
log-probabilities and its target probabilities (log-probabilities with ``log_target=True``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from .helpers import batches, guarded, mlp, slugs


def _distill(student_out, target_of, loss_fn, steps: int = 8):
    """A student learning digits from a fixed teacher's soft labels (temperature 2)."""
    torch.manual_seed(1)
    teacher = mlp(hidden=48)
    student = mlp()
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)
    g = guarded(student, opt, check_every=1)
    for xb, _ in batches(32, steps):
        with torch.no_grad():
            t_logits = teacher(xb) / 2.0
        loss = loss_fn(student_out(student(xb) / 2.0), target_of(t_logits))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report()


def test_kl_div_module_fed_probabilities():
    findings = _distill(lambda s: s.softmax(-1), lambda t: t.softmax(-1), nn.KLDivLoss(reduction="batchmean"))
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "log-probabilities" in findings[0].message and "kl_div" in findings[0].where
    assert "test_loss_domain.py" in findings[0].where


def test_kl_div_fed_raw_logits():
    findings = _distill(lambda s: s, lambda t: F.softmax(t, 1), lambda a, b: F.kl_div(a, b, reduction="batchmean"))
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "raw logits" in findings[0].message


def test_kl_div_log_target_given_probabilities():
    findings = _distill(lambda s: F.log_softmax(s, 1), lambda t: F.softmax(t, 1),
                        lambda a, b: F.kl_div(a, b, reduction="batchmean", log_target=True))
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "log_target=True" in findings[0].message


def test_kl_div_in_its_domain_is_quiet():
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    for student_out, target_of, loss_fn in (
            (lambda s: F.log_softmax(s, 1), lambda t: F.softmax(t, 1),
             lambda a, b: F.kl_div(a, b, reduction="batchmean")),
            (lambda s: s.log_softmax(-1), lambda t: t.log_softmax(-1), kl)):
        assert _distill(student_out, target_of, loss_fn) == []


def test_bce_loss_fed_raw_logits_is_explained():
    model = mlp(out=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    xb, yb = next(batches(32, 1))
    with pytest.raises(RuntimeError, match="between 0 and 1"):  # PyTorch's own error stays the user's
        nn.BCELoss()(model(xb).squeeze(1), (yb % 2).float())
    findings = g.report()
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "BCEWithLogitsLoss" in findings[0].fix


def test_bce_loss_on_sigmoid_outputs_is_quiet():
    model = nn.Sequential(mlp(out=1), nn.Sigmoid())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, 4):
        opt.zero_grad()
        nn.BCELoss()(model(xb).squeeze(1), (yb % 2).float()).backward()
        opt.step()
    assert g.report() == []


def _segment(targets_of, steps: int = 4):
    """A per-pixel binary 'mask' task on digits: each of the 64 pixels is on (>= 8 of 16) or off."""
    model = mlp(out=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, check_every=1)
    for xb, _ in batches(32, steps):
        mask = (xb >= 0.5).float()
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(model(xb), targets_of(mask)).backward()
        opt.step()
    return g.report()


def test_binary_targets_read_as_0_255():
    findings = _segment(lambda m: m * 255)
    assert slugs(findings) == ["wrong-loss-for-task"]
    assert "[0, 255]" in findings[0].message and "/ 255" in findings[0].fix


def test_binary_targets_in_their_domain_are_quiet():
    assert _segment(lambda m: m) == []
    assert _segment(lambda m: m * 0.9 + 0.05) == []  # label smoothing stays in [0, 1]


def test_binary_targets_in_minus_one_one():
    findings = _segment(lambda m: m * 2 - 1)
    assert slugs(findings) == ["wrong-loss-for-task"]
    assert "{-1, 1}" in findings[0].message


def test_an_ignore_code_beside_both_classes_is_quiet():
    """-1 marks a missing label, masked out of a reduction='none' loss (multi-label data with gaps)."""
    model = mlp(out=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, check_every=1)
    for xb, _ in batches(32, 4):
        y = (xb >= 0.5).float()
        y[:, :8] = -1.0  # unknown
        loss = F.binary_cross_entropy_with_logits(model(xb), y, reduction="none")
        loss = loss[y >= 0].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert g.report() == []


class _LogSoftmaxOver(nn.Module):
    """An MLP ending in ``log_softmax(dim=...)`` (pointnet.pytorch#27's ``F.log_softmax(x, dim=0)``)."""

    def __init__(self, dim: int):
        super().__init__()
        self.net, self.dim = mlp(), dim

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=self.dim)


def _nll_run(model, steps: int = 4):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        F.nll_loss(model(xb), yb).backward()
        opt.step()
    return g.report()


def test_log_softmax_over_the_batch_into_nll():
    findings = _nll_run(_LogSoftmaxOver(0))
    assert "softmax-over-batch" in slugs(findings)
    found = next(f for f in findings if f.slug == "softmax-over-batch")
    assert "dimension 0" in found.message and "nll_loss" in found.where


def test_log_softmax_over_time_into_nll():
    """A (batch, time, classes) output normalised over time, flattened for NLLLoss."""
    torch.manual_seed(0)
    rnn, head = nn.GRU(8, 16, batch_first=True), nn.Linear(16, 10)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    model = nn.ModuleDict({"rnn": rnn, "head": head})
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, 4):
        seq = xb.view(32, 8, 8)  # eight rows of eight pixels, read as a sequence
        out = head(rnn(seq)[0])  # (32, 8, 10)
        logp = F.log_softmax(out, dim=1)  # over time
        loss = F.nll_loss(logp.reshape(-1, 10), yb.repeat_interleave(8))
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings = g.report()
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "class dimension" in findings[0].message


def test_log_softmax_over_classes_into_nll_is_quiet():
    assert _nll_run(_LogSoftmaxOver(1)) == []
    assert _nll_run(_LogSoftmaxOver(-1)) == []
