"""``val-overlaps-train`` below and above half of the validation set, in the engine and the doctor."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Subset, TensorDataset

import overt
from overt.doctor import probes
from overt.doctor.result import Verdict
from tests.wild.cases.common import digits_sets


def _fit(train, val) -> list[str]:
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    summary = overt.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), train, val,
                            epochs=1, batch_size=128, progress="off").fit()
    return [f["slug"] for f in summary["findings"]]


def test_engine_fails_a_validation_set_drawn_from_training_and_ignores_a_few_duplicates():
    train, val = digits_sets()
    assert _fit(train, Subset(train, list(range(0, 300, 2)))) == ["val-overlaps-train"]
    x, y = val.tensors
    few = TensorDataset(torch.cat([train.tensors[0][:5], x[5:]]), y)  # 5 of 397 duplicated: left to the doctor
    assert _fit(train, few) == []


def test_doctor_fails_from_half_the_validation_set_and_warns_below():
    train, val = digits_sets()
    x, y = val.tensors
    few = TensorDataset(torch.cat([train.tensors[0][:5], x[5:]]), y)
    r = probes.check_data(train, few, batch_size=64)
    assert r.verdict is Verdict.WARN and [f.slug for f in r.findings] == ["val-overlaps-train"]
    most = TensorDataset(train.tensors[0][:300], train.tensors[1][:300])
    r = probes.check_data(train, most, batch_size=64)
    assert r.verdict is Verdict.FAIL and "val-overlaps-train" in [f.slug for f in r.findings]
