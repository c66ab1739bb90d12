"""loss-arguments-swapped (issue 33, round three's w90): a cross-entropy trained through its target,
and the honest message of BCEWithLogitsLoss given values in [0, 1] that no sigmoid made.  Planted bugs
and their clean twins on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import batches, guarded, slugs


def _autoencoder(swapped: bool, loss_fn=None):
    """A digits autoencoder whose reconstruction term is ``loss_fn`` (F.binary_cross_entropy_with_logits, looked
    up when called: the guards wrap it)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for xb, _ in batches(32, 8):
        logits = model(xb)
        fn = loss_fn or F.binary_cross_entropy_with_logits
        loss = fn(xb, logits) if swapped else fn(logits, xb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_bce_with_logits_given_the_data_as_input_is_named_and_its_twin_is_silent():
    findings, text = _autoencoder(True)
    assert slugs(findings) == ["loss-arguments-swapped"], text
    assert "test_loss_arguments.py:" in text and "data, no autograd history" in text
    assert "a sigmoid" not in text  # the data in [0, 1] is not called the model's probabilities
    findings, text = _autoencoder(False)
    assert findings == [], text


@pytest.mark.parametrize("swapped", [True, False])
def test_soft_label_cross_entropy_module_with_the_model_in_the_target(swapped):
    """Another form: nn.CrossEntropyLoss with probability targets (distillation from fixed soft labels)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = guarded(model, opt, ignore=TIMING)
    loss_fn = nn.CrossEntropyLoss()
    for xb, yb in batches(32, 8):
        soft = F.one_hot(yb, 10).float() * 0.9 + 0.01
        out = model(xb)
        loss = loss_fn(soft, out.softmax(1)) if swapped else loss_fn(out, soft)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-arguments-swapped"] if swapped else []), text


def test_logits_held_in_unit_range_are_not_called_a_sigmoid():
    """Raw logits clamped into [0, 1] before BCEWithLogitsLoss: the finding says what it sees (no
    sigmoid made them, every prediction is in [0.5, 0.73]), not a double sigmoid."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for xb, yb in batches(32, 8):
        attrs = torch.stack([yb % 2 == 0, yb > 4, yb == 0, yb == 7], 1).float()
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(model(xb).clamp(0, 1), attrs).backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == ["softmax-before-cross-entropy"], text
    assert "not a sigmoid" in text and "the model outputs probabilities (a sigmoid)" not in text


def _count_regression(loss_name: str, swapped: bool):
    """Other losses linear in their target (issue 33, branch argname): a Poisson regression of the digit's
    value (F.poisson_nll_loss on a log-rate) and a multi-label attribute head
    (nn.MultiLabelSoftMarginLoss), each trained with the data in the input and the model in the target."""
    torch.manual_seed(0)
    width = 1 if loss_name == "poisson" else 4
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, width))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    multilabel = nn.MultiLabelSoftMarginLoss()
    for xb, yb in batches(32, 8):
        out = model(xb)
        if loss_name == "poisson":
            counts = yb.float().unsqueeze(1)
            loss = F.poisson_nll_loss(counts, out) if swapped else F.poisson_nll_loss(out, counts)
        else:
            attrs = torch.stack([yb % 2 == 0, yb > 4, yb == 0, yb == 7], 1).float()
            loss = multilabel(attrs, out) if swapped else multilabel(out, attrs)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("loss_name", ["poisson", "multilabel"])
def test_other_losses_linear_in_their_target_given_the_model_as_target(loss_name):
    findings, text = _count_regression(loss_name, True)
    assert slugs(findings) == ["loss-arguments-swapped"], text
    assert "is linear in its target" in text and "test_loss_arguments.py:" in text
    findings, text = _count_regression(loss_name, False)
    assert findings == [], text


@pytest.mark.parametrize("swapped", [True, False])
def test_symmetric_losses_stay_silent_in_either_order(swapped):
    """mse_loss and l1_loss give the same value and gradient in either order: no finding."""
    findings, text = _autoencoder(swapped, lambda a, b: F.mse_loss(a, b) + F.l1_loss(a, b))
    assert findings == [], text
