"""class-weights-inverted read off a ``torch.where`` on the target (overt/guards/whereweight.py, session 55's
w418): a binary focal loss on the digits (the digit 8 against the others: a tenth are positives) weighted by
class after the per-sample loss.  Named: the rare positives weighed by alpha = 0.9 and the negatives left at 1
(the factor on one class only, as a where and as ``alpha * t + (1 - t)``), and weights listed the wrong way round
(the frequent negatives 4, the rare positives 1).  Quiet: the alpha-balanced pair (alpha, 1 - alpha) for alpha 0.9 and 0.25 (the focal-loss
paper's), as a where and as torchvision's ``alpha * t + (1 - alpha) * (1 - t)``, a factor on the rare class that
weighs it up, a condition that is not the target's class (a confidence threshold), a weight that varies within a
class.  Small real runs, found as ``overt run``
finds models (global hooks)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit, slugs

SLUG = "class-weights-inverted"


def _focal(form: str, alpha: float = 0.9) -> list:
    torch.manual_seed(0)
    model = nn.Linear(64, 1)

    def step(x, y):
        logits = model(x).squeeze(1)
        target = (y == 8).float()
        p = torch.sigmoid(logits)
        ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        p_t = torch.where(target == 1, p, 1 - p)
        fl = (1 - p_t) ** 2 * ce
        if form == "one-class":  # the bug: alpha on the positives only
            fl = torch.where(target == 1, fl * alpha, fl)
        elif form == "reversed":  # the frequent negatives weighed 4, the rare positives 1
            fl = torch.where(target == 0, fl * 4.0, fl)
        elif form == "balanced":
            fl = torch.where(target == 1, fl * alpha, fl * (1 - alpha))
        elif form == "up":  # the rare positives weighed up, the negatives at 1: pos_weight's meaning
            fl = torch.where(target == 1, fl * 9.0, fl)
        elif form == "confident":  # a factor on the samples the model is sure of: not a class
            fl = torch.where(p_t.detach() > 0.9, fl * 0.5, fl)
        elif form == "tensor-one-class":  # the bug written with arithmetic: alpha on the positives, 1 elsewhere
            fl = fl * (alpha * target + (1 - target))
        elif form == "tensor-balanced":  # torchvision's sigmoid_focal_loss form
            fl = fl * (alpha * target + (1 - alpha) * (1 - target))
        elif form == "tensor-per-sample":  # a weight per sample (its confidence): not one value per class
            fl = fl * (1 - p_t.detach())
        return fl.mean()

    return guarded_fit(model.parameters(), (step(xb, yb) for xb, yb in batches(64, 40)), lr=1e-2)


@pytest.mark.parametrize("form", ["one-class", "reversed", "tensor-one-class"])
def test_where_weights_favouring_the_frequent_class_are_named(form):
    found = [f for f in _focal(form) if f.slug == SLUG]
    assert len(found) == 1, found
    assert ("one value per class" if form.startswith("tensor") else "torch.where") in found[0].message
    assert "positives" in found[0].message
    if form.endswith("one-class"):
        assert "applied to class 1 only" in found[0].message


@pytest.mark.parametrize("form,alpha", [("balanced", 0.9), ("balanced", 0.25), ("up", 0.9), ("confident", 0.9),
                                        ("tensor-balanced", 0.9), ("tensor-balanced", 0.25),
                                        ("tensor-per-sample", 0.9)])
def test_where_weights_that_balance_or_are_not_classes_are_quiet(form, alpha):
    assert SLUG not in slugs(_focal(form, alpha))
