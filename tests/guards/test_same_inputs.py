"""inputs-duplicated at run time (issue 33, branch embrows14): digits' pixels binned to ids 0..16, two fields of
eight pixels each embedded by their own tables (the planted bug passes the first field in both slots), its twin
that passes each field, and correct programs near the premise that must stay silent: a model given its own
labels equal to its input (a language model that shifts them inside), two equal 0/1 masks, and one field."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run, slugs

FIRST = [19, 20, 27, 28, 35, 36, 43, 44]
SECOND = [21, 22, 29, 30, 37, 38, 45, 46]


def _ids(xb, pixels):
    return (xb[:, pixels] * 16).round().long()


class TwoFields(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Embedding(17, 4)
        self.b = nn.Embedding(17, 4)
        self.head = nn.Linear(64, 10)

    def forward(self, field_ids, other_ids):
        return self.head(torch.cat([self.a(field_ids), self.b(other_ids)], 1).flatten(1))


class WithLabels(nn.Module):
    """A model handed its own targets (equal to its input), as a language model that shifts them inside is."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(17, 4)
        self.head = nn.Linear(32, 10)

    def forward(self, ids, labels):
        return self.head(self.emb(ids).flatten(1)) + 0 * labels.sum()


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(17, 4)
        self.head = nn.Linear(32, 10)

    def forward(self, ids, mask, keep):
        return self.head((self.emb(ids) * (mask * keep)[..., None]).flatten(1))


def _run(model, inputs, steps: int = 12):
    def train():
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(*inputs(xb)), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return guarded_run(train)


def test_one_field_given_in_two_slots_is_named_and_its_twin_is_silent():
    findings, text = _run(TwoFields(), lambda xb: (_ids(xb, FIRST), _ids(xb, FIRST).clone()))
    assert slugs(findings) == ["inputs-duplicated"], text
    assert "`field_ids` and `other_ids`" in findings[0].message and "test_same_inputs.py" in findings[0].where
    assert slugs(_run(TwoFields(), lambda xb: (_ids(xb, FIRST), _ids(xb, SECOND)))[0]) == []


def test_correct_programs_near_the_premise_are_silent():
    assert slugs(_run(WithLabels(), lambda xb: (_ids(xb, FIRST), _ids(xb, FIRST)))[0]) == []
    ones = lambda xb: torch.ones(len(xb), 8, dtype=torch.long)  # noqa: E731
    assert slugs(_run(Masked(), lambda xb: (_ids(xb, FIRST), ones(xb), ones(xb)))[0]) == []
    assert slugs(_run(nn.Sequential(nn.Embedding(17, 4), nn.Flatten(), nn.Linear(32, 10)),
                      lambda xb: (_ids(xb, FIRST),))[0]) == []
