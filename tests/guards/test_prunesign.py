"""pruning-removes-one-sign at run time (issue 33): an MLP trained on digits and then pruned to 50% per weight
matrix by a score taken on the signed weight (the planted bug: every large negative weight removed), its twin
scored by ``abs()``, and correct programs near the premise that must stay silent: a random pruning, a pruning of
whole rows by their norm, weights kept non-negative by a projection after every step, and no pruning at all."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.guards.helpers import batches, guarded_run, mlp, slugs


def _run(prune=None, project=False, steps: int = 16):
    model = mlp(hidden=32)

    def train():
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if project:
                with torch.no_grad():
                    for p in model.parameters():
                        p.clamp_(min=0)
        if prune is not None:
            with torch.no_grad():
                for layer in (model[0], model[2]):
                    score = prune(layer.weight)
                    k = int(0.5 * score.numel())
                    threshold = score.flatten().kthvalue(k).values
                    layer.weight.mul_((score > threshold).float())
        with torch.no_grad():
            model(next(batches(64, 1))[0])
    return guarded_run(train)


def test_a_pruning_scored_by_the_signed_weight_is_named_and_its_twin_is_silent():
    findings, text = _run(prune=lambda w: w.detach())
    assert slugs(findings) == ["pruning-removes-one-sign"], text
    assert "negative" in findings[0].message and "weight" in findings[0].where
    assert slugs(_run(prune=lambda w: w.detach().abs())[0]) == []


def test_correct_programs_near_the_premise_are_silent():
    g = torch.Generator().manual_seed(0)
    assert slugs(_run(prune=lambda w: torch.rand(w.shape, generator=g))[0]) == []
    assert slugs(_run(prune=lambda w: w.detach().norm(dim=1, keepdim=True).expand_as(w)
                      + 1e-6 * torch.rand(w.shape, generator=g))[0]) == []
    assert slugs(_run(project=True)[0]) == []
    assert slugs(_run()[0]) == []
