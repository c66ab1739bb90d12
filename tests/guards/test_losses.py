"""Losses, labels and outputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from .helpers import batches, guarded, mlp, slugs, train


class _SoftmaxNet(nn.Module):
    def __init__(self, softmax: bool):
        super().__init__()
        torch.manual_seed(0)
        self.net = mlp()
        self.softmax = softmax

    def forward(self, x):
        out = self.net(x)
        return out.softmax(dim=1) if self.softmax else out


def test_softmax_before_cross_entropy():
    model = _SoftmaxNet(softmax=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6, loss_fn=nn.CrossEntropyLoss())
    findings = g.report()
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "helpers.py" in findings[0].where  # the loss call in the user's loop
    assert findings[0].step == 0


def test_nll_loss_fed_raw_logits():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6, loss_fn=nn.NLLLoss())
    findings = g.report()
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "log_softmax" in findings[0].message


def test_logits_into_cross_entropy_and_log_softmax_into_nll_are_quiet():
    for loss_fn in (nn.CrossEntropyLoss(), lambda out, y: F.nll_loss(F.log_softmax(out, 1), y)):
        model = _SoftmaxNet(softmax=False)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt, check_every=1)
        train(model, opt, steps=6, loss_fn=loss_fn)
        assert g.report() == []


def test_wrong_loss_mse_on_class_indices():
    model = mlp(out=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = guarded(model, opt)
    with pytest.warns(UserWarning, match="broadcasting"):  # PyTorch only warns; the guard says why
        train(model, opt, steps=6, loss_fn=lambda out, y: F.mse_loss(out, y.float()))  # (N,1) vs (N,)
    findings = g.report()
    assert slugs(findings) == ["wrong-loss-for-task"]
    assert "(32, 1)" in findings[0].message and "(32,)" in findings[0].message
    assert "test_losses.py" in findings[0].where


def test_wrong_loss_integer_targets():
    model = mlp(out=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = guarded(model, opt)
    train(model, opt, steps=4, loss_fn=lambda out, y: F.mse_loss(out.squeeze(1), y))
    findings = g.report()
    assert slugs(findings) == ["wrong-loss-for-task"]
    assert "torch.int64" in findings[0].message


def test_regression_with_matching_shapes_is_quiet():
    model = mlp(out=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = guarded(model, opt)
    train(model, opt, steps=6, loss_fn=lambda out, y: F.mse_loss(out.squeeze(1), y.float() / 9))
    assert g.report() == []


def test_label_out_of_range_names_the_batch():
    model = mlp(out=8)  # 10 classes in the data, 8 outputs
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    with pytest.raises(IndexError):
        train(model, opt, steps=10)
    findings = g.report()
    assert slugs(findings) == ["label-out-of-range"]
    f = findings[0]
    assert "outside [0, 8)" in f.message and "max 9" in f.message
    assert "helpers.py" in f.where


def test_labels_in_range_with_ignore_index_are_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    model.train()
    for xb, yb in batches(32, 6):
        yb = yb.clone()
        yb[0] = -100  # ignored on purpose
        opt.zero_grad()
        F.cross_entropy(model(xb), yb, ignore_index=-100).backward()
        opt.step()
    assert g.report() == []
