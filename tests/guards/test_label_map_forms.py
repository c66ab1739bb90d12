"""eval-classes-renumbered in other forms than a digits classifier (overt/guards/labelmap.py via predshape.py;
issue 33, branch conventions): a small tabular split whose class names were mapped to indices twice, once
for training (sorted) and once for evaluation (first-seen order, or 1-based), on sklearn's wine data (58
evaluated samples: under 64, concluded only when the renumbered accuracy is 0.8 or more); a segmenter
(argmax over dim 1 of (N, K, H, W) outputs) trained with cross-entropy on class-index masks or with a
per-channel BCE on one-hot masks, scored against masks saved 1-based or with the class list reversed.
Each twin uses the training numbering."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_wine
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs


@pytest.mark.parametrize("eval_map", ["first-seen", "one-based", "training"])
def test_class_names_mapped_again_for_evaluation_are_named(eval_map):
    torch.manual_seed(0)
    d = load_wine()
    x = torch.tensor(d.data, dtype=torch.float32)
    x = (x - x.mean(0)) / x.std(0)
    names = [["barolo", "grignolino", "barbera"][int(t)] for t in d.target]
    perm = torch.randperm(len(names), generator=torch.Generator().manual_seed(0)).tolist()
    tr, te = perm[:120], perm[120:]
    train_map = {c: i for i, c in enumerate(sorted({names[i] for i in tr}))}
    if eval_map == "first-seen":
        test_map = {c: i for i, c in enumerate(dict.fromkeys(names[i] for i in te))}
    elif eval_map == "one-based":
        test_map = {c: i + 1 for i, c in enumerate(sorted({names[i] for i in te}))}
    else:
        test_map = train_map
    ytr = torch.tensor([train_map[names[i]] for i in tr])
    yte = torch.tensor([test_map[names[i]] for i in te])
    model = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(30):
        for i in range(0, 120, 20):
            loss = F.cross_entropy(model(x[tr][i:i + 20]), ytr[i:i + 20])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = float((model(x[te]).argmax(1) == yte).float().mean())
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == ([] if eval_map == "training" else ["eval-classes-renumbered"]), text
    assert (acc > 0.9) == (eval_map == "training")


def _blobs(n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """16x16 images of noise with bright (class 1) and dark (class 2) squares; background 0."""
    x = np.zeros((n, 1, 16, 16), np.float32)
    mask = np.zeros((n, 16, 16), np.int64)
    for k in range(n):
        for cls in (1, 2):
            for _ in range(2):
                r, c, h = rng.integers(0, 11), rng.integers(0, 11), rng.integers(3, 6)
                mask[k, r:r + h, c:c + h] = cls
        x[k, 0] = np.where(mask[k] == 1, 1.0, np.where(mask[k] == 2, -1.0, 0.0))
    x += 0.4 * rng.normal(size=x.shape).astype(np.float32)
    return torch.tensor(x), torch.tensor(mask)


@pytest.mark.parametrize("loss", ["cross-entropy", "one-hot-bce"])
@pytest.mark.parametrize("masks", ["one-based", "reversed", "training"])
def test_a_segmenter_scored_against_renumbered_masks_is_named(loss, masks):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x, m = _blobs(200, rng)
    xv, mv = _blobs(40, rng)
    mv = {"one-based": mv + 1, "reversed": 2 - mv, "training": mv}[masks]
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(4):
        for i in range(0, 200, 20):
            out = model(x[i:i + 20])
            if loss == "cross-entropy":
                value = F.cross_entropy(out, m[i:i + 20])
            else:
                value = F.binary_cross_entropy_with_logits(out, F.one_hot(m[i:i + 20], 3).permute(0, 3, 1, 2).float())
            opt.zero_grad()
            value.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = float((model(xv).argmax(1) == mv).float().mean())
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == ([] if masks == "training" else ["eval-classes-renumbered"]), text
    assert (acc > 0.8) == (masks == "training")
