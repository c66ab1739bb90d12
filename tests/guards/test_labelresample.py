"""label-map-interpolated (issue 33; tests/wild w386): a class-index segmentation target resampled with the image
by a linear interpolation and rounded back to integers, in forms other than the wild case's grid_sample rotation --
an F.interpolate resize of the mask batch, a per-sample resize inside a Dataset read by a DataLoader, a truncating
.long() instead of .round() -- each beside its twin resampled in 'nearest' mode; and correct programs near it
silent: a binary mask resampled bilinearly and rounded (a threshold at one half), one-hot soft targets resampled
bilinearly and kept as probabilities.  Real small runs on the digits: every stroke pixel is labelled by its digit's
class group, so strokes of class 3 or 4 meet the background (class 0) and a bilinear resampling rings them with
classes 1 and 2."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _data(n: int = 320, classes: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """Digit images (N, 1, 16, 16) and their masks (N, 16, 16): 0 off the stroke, 1 + label % (classes - 1) on it."""
    x, y = digits()
    img = F.interpolate(x[:n].reshape(-1, 1, 8, 8), size=(16, 16), mode="bilinear", align_corners=False)
    mask = (img[:, 0] > 0.5).long() * (1 + y[:n] % (classes - 1))[:, None, None]
    return img, mask


def _net(classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, classes, 3, padding=1))


def _train(resample, classes: int = 5, steps: int = 6, soft: bool = False) -> tuple[list, str]:
    torch.manual_seed(0)
    img, mask = _data(classes=classes)
    model = _net(classes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(steps):
        xb, mb = resample(img[40 * i:40 * (i + 1)], mask[40 * i:40 * (i + 1)])
        out = model(xb)
        loss = F.cross_entropy(out, mb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def _resize(mode: str):
    def resample(x, m):
        x = F.interpolate(x, size=(24, 24), mode="bilinear", align_corners=False)
        kw = {} if mode == "nearest" else {"align_corners": False}
        m = F.interpolate(m[:, None].float(), size=(24, 24), mode=mode, **kw)
        return x, m[:, 0].round().long()
    return resample


@pytest.mark.parametrize("mode", ["bilinear", "nearest"], ids=["bilinear", "twin"])
def test_a_mask_batch_resized_bilinearly_is_named_at_its_call(mode):
    findings, text = _train(_resize(mode))
    if mode == "bilinear":
        assert slugs(findings) == ["label-map-interpolated"], text
        assert "F.interpolate call at tests/guards/test_labelresample.py:" in text, text
        assert "F.interpolate(mode='bilinear')" in text, text
    else:
        assert "label-map-interpolated" not in slugs(findings), text


def _rotate(mode: str | None):
    def resample(x, m):
        n = len(x)
        a = (torch.rand(n) - 0.5) * math.pi / 2
        theta = torch.stack([torch.stack([a.cos(), -a.sin(), 0 * a], 1), torch.stack([a.sin(), a.cos(), 0 * a], 1)], 1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
        kw = {} if mode is None else {"mode": mode}  # grid_sample's default mode is bilinear
        return x, F.grid_sample(m[:, None].float(), grid, align_corners=False, **kw)[:, 0].long()
    return resample


@pytest.mark.parametrize("mode", [None, "nearest"], ids=["default-bilinear-truncated", "twin"])
def test_a_rotation_that_truncates_a_bilinear_mask_is_named(mode):
    findings, text = _train(_rotate(mode))
    if mode is None:
        assert slugs(findings) == ["label-map-interpolated"], text
        assert "F.grid_sample(mode='bilinear')" in text, text
    else:
        assert "label-map-interpolated" not in slugs(findings), text


class _Scaled(Dataset):
    """Each sample resized to 24x24 as it is read: the image bilinearly, the mask in ``mode``."""

    def __init__(self, mode: str):
        self.img, self.mask = _data()
        self.mode = mode

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        x = F.interpolate(self.img[i:i + 1], size=(24, 24), mode="bilinear", align_corners=False)[0]
        m = F.interpolate(self.mask[i][None, None].float(), size=(24, 24), mode=self.mode)[0, 0]
        return x, m.round().clamp(0, 4).long()  # bicubic overshoots the map's classes


@pytest.mark.parametrize("mode", ["bicubic", "nearest"], ids=["bicubic", "twin"])
def test_a_mask_resized_per_sample_in_a_dataset_is_named(mode):
    torch.manual_seed(0)
    model = _net(5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i, (xb, mb) in enumerate(DataLoader(_Scaled(mode), batch_size=32, shuffle=True)):
        loss = F.cross_entropy(model(xb), mb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i == 5:
            break
    findings, text = g.report(), g.session.options.stream.getvalue()
    if mode == "bicubic":
        assert slugs(findings) == ["label-map-interpolated"], text
    else:
        assert "label-map-interpolated" not in slugs(findings), text


def test_a_binary_mask_resampled_bilinearly_and_rounded_is_silent():
    """Rounding a bilinear 0/1 map thresholds it at one half: every pixel keeps a class a neighbour has."""
    findings, text = _train(_resize("bilinear"), classes=2)
    assert "label-map-interpolated" not in slugs(findings), text


def test_one_hot_targets_resampled_bilinearly_as_probabilities_are_silent():
    def resample(x, m):
        x = F.interpolate(x, size=(24, 24), mode="bilinear", align_corners=False)
        soft = F.interpolate(F.one_hot(m, 5).permute(0, 3, 1, 2).float(), size=(24, 24), mode="bilinear",
                             align_corners=False)
        return x, soft
    findings, text = _train(resample)
    assert "label-map-interpolated" not in slugs(findings), text
