"""feature-columns-collapsed at run time (issue 33, branch features19): per-row features derived from digits' pixels
(each image's 8 rows summarised by their slope over the columns), once per pixel row as meant and once with the slope
summed without an axis (the planted bug: the 8 slope columns hold one value per image), and correct programs near
the premise that must stay silent: the raw pixels, a feature matrix with one column duplicated, constant padding
columns, and a grey image repeated over three channels."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs


def _features(collapse: bool) -> torch.Tensor:
    """Each image's 8 pixel rows and their slope over the columns (one slope per row), as one matrix."""
    x, _ = digits()
    imgs = x.numpy().reshape(-1, 8, 8)
    cols = np.arange(8) - 3.5
    out = []
    for img in imgs:
        taps = img * cols[None, :]  # (rows, columns)
        slope = np.full(8, np.sum(taps)) if collapse else np.sum(taps, axis=1)
        out.append(np.concatenate([img.mean(1), slope / 42.0]))
    return torch.tensor(np.array(out), dtype=torch.float32)


def _run(feats: torch.Tensor, model: nn.Module | None = None, steps: int = 12):
    _, y = digits()
    torch.manual_seed(0)
    model = model or nn.Sequential(nn.Flatten(), nn.Linear(feats[0].numel(), 32), nn.ReLU(), nn.Linear(32, 10))

    def train():
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for k in range(steps):
            j = (k * 64) % 1400
            loss = F.cross_entropy(model(feats[j:j + 64]), y[j:j + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return guarded_run(train)


def test_a_slope_summed_without_its_axis_is_named_and_its_twin_is_silent():
    findings, text = _run(_features(collapse=True))
    assert slugs(findings) == ["feature-columns-collapsed"], text
    f = findings[0]
    assert "columns 8-15" in f.message and "64 rows" in f.message, f.message
    assert "test_samecolumns.py" in f.where
    assert slugs(_run(_features(collapse=False))[0]) == []


def test_correct_inputs_near_the_premise_are_silent():
    x, _ = digits()
    assert slugs(_run(x)[0]) == []  # raw pixels: sparse border columns equal by chance are not rich
    # a dataset that holds one field twice
    assert slugs(_run(torch.cat([x, x[:, 20:21]], 1))[0]) == []
    # constant padding columns
    assert slugs(_run(torch.cat([x, torch.zeros(len(x), 6)], 1))[0]) == []
    # a grey image repeated over three channels (four dimensions: not judged)
    grey = x.reshape(-1, 1, 8, 8).repeat(1, 3, 1, 1)
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 10))
    assert slugs(_run(grey, conv)[0]) == []


def test_blank_pixels_standardised_per_sample_are_silent():
    """Digits standardised per sample: the always-blank pixels (the left border, scattered over the 64 columns)
    all become -mean/std of their row, equal to each other on every row and different across rows, but they were
    equal before the transform and sit at each row's lowest value: no information was lost (test_norm_function's
    and test_skew's programs; a false finding of this entry before)."""
    x, _ = digits()
    feats = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    findings, text = _run(feats)
    assert "feature-columns-collapsed" not in slugs(findings), text
