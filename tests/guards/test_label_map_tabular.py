"""eval-classes-renumbered on a small tabular split (overt/guards/labelmap.py; issue 33, branch conventions):
class names mapped to indices twice, once for training (sorted) and once for evaluation (first-seen order,
or 1-based), on sklearn's wine data (58 evaluated samples: under 64, concluded only when the renumbered
accuracy is 0.8 or more).  The twin reuses the training map."""

from __future__ import annotations

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
