"""targets-one-class (issue 33, data pipelines; round three's w81): classification targets that lost
their values between the data set and the loss.  Planted bugs in forms unlike w81 (which applies a
``to_tensor`` to a segmentation mask) and their clean twins on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _train(loader, model, loss="cross_entropy", epochs=3):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            getattr(F, loss)(model(xb), yb).backward()  # looked up per call: the guards wrap F's losses
            opt.step()
    return g.report(), g.session.options.stream.getvalue()


class _Scaled(Dataset):
    """Labels stored as fractions of the class count (a 'normalised' label column); ``bug``: cast back
    with ``.long()`` (every label truncated to 0) instead of multiplied back."""

    def __init__(self, x, y, bug):
        self.x, self.frac, self.bug = x, y.float() / 10, bug

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        label = self.frac[i].long() if self.bug else (self.frac[i] * 10).round().long()
        return self.x[i], label


@pytest.mark.parametrize("bug", [True, False])
def test_float_labels_truncated_by_long(bug):
    torch.manual_seed(0)
    x, y = digits()
    loader = DataLoader(_Scaled(x[:800], y[:800], bug), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    findings, text = _train(loader, model)
    if bug:
        assert slugs(findings) == ["targets-one-class"], text
        assert "is class 0, while the model scores 10 classes" in text
        assert "test_targets_one_class.py:" in text  # the loss call
    else:
        assert findings == [], text


class _Segments(Dataset):
    """A dense target per pixel (class = digit + 1 on the strokes, 0 elsewhere); ``bug``: the mask goes
    through the image's normalisation ((m - mean) / std, then .long()), which crushes the ids."""

    def __init__(self, x, y, bug):
        self.img = x.reshape(-1, 1, 8, 8)
        self.mask = torch.where(self.img[:, 0] > 0.4, y[:, None, None] + 1, 0)
        self.bug = bug

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        image = (self.img[i] - 0.5) / 0.5
        mask = self.mask[i]
        if self.bug:
            mask = ((mask / 255.0 - 0.5) / 0.5).clamp_min(0).long()  # the image's ToTensor + Normalize
        return image, mask


@pytest.mark.parametrize("bug", [True, False])
def test_mask_normalised_with_the_image_nll(bug):
    torch.manual_seed(0)
    x, y = digits()
    loader = DataLoader(_Segments(x[:400], y[:400], bug), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 11, 1), nn.LogSoftmax(1))
    findings, text = _train(loader, model, loss="nll_loss")
    if bug:
        assert slugs(findings) == ["targets-one-class"], text
        assert "F.nll_loss" in text
    else:
        assert findings == [], text


def test_class_sorted_unshuffled_data_is_not_one_class():
    """A data set sorted by class with shuffle=False: the first batches are all one class, two passes
    are not."""
    torch.manual_seed(0)
    x, y = digits()
    order = torch.argsort(y[:600], stable=True)
    loader = DataLoader(TensorDataset(x[:600][order], y[:600][order]), batch_size=32)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    findings, text = _train(loader, model)
    assert "targets-one-class" not in slugs(findings), text


def test_one_epoch_is_not_judged():
    torch.manual_seed(0)
    x, y = digits()
    loader = DataLoader(_Scaled(x[:800], y[:800], True), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    findings, text = _train(loader, model, epochs=1)
    assert "targets-one-class" not in slugs(findings), text


class _BinaryMasks(Dataset):
    """Binary masks stored as uint8 0/1 (the strokes of a digit); ``bug``: converted the way ToTensor
    converts an image (divided by 255), so every one becomes 1/255."""

    def __init__(self, x, bug):
        self.img = x.reshape(-1, 1, 8, 8)
        self.mask = (self.img > 0.4).to(torch.uint8)
        self.bug = bug

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        mask = self.mask[i].float()
        return self.img[i], mask / 255 if self.bug else mask


@pytest.mark.parametrize("bug", [True, False])
def test_binary_mask_rescaled_by_to_tensor(bug):
    torch.manual_seed(0)
    x, _ = digits()
    loader = DataLoader(_BinaryMasks(x[:400], bug), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
    findings, text = _train(loader, model, loss="binary_cross_entropy_with_logits")
    if bug:
        assert slugs(findings) == ["targets-one-class"], text
        assert "0.00392" in text
    else:
        assert findings == [], text


def test_domain_labels_constant_per_call_site_are_meant():
    """A domain classifier (two classes) scored on source batches with label 0 and target batches with
    label 1, one call site each: constant per site on purpose."""
    torch.manual_seed(0)
    x, _ = digits()
    src = DataLoader(TensorDataset(x[:600]), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        for (xb,) in src:
            opt.zero_grad()
            zeros = torch.zeros(len(xb), dtype=torch.long)
            loss = F.cross_entropy(model(xb), zeros)
            loss = loss + F.cross_entropy(model(xb.flip(1)), zeros + 1)
            loss.backward()
            opt.step()
    findings = g.report()
    assert "targets-one-class" not in slugs(findings), g.session.options.stream.getvalue()
