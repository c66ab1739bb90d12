"""Backward failures explained: a tensor autograd saved, modified in place (module and operation
named, anomaly mode pointed to), and debug_anomaly=true naming the first operation that made NaN."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import Subset

import overt
from overt.engine.loop import Trainer
from overt.errors import OvertError


class Net(nn.Module):
    def __init__(self, inplace: bool, log: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(64, 32), nn.Sigmoid(), nn.ReLU(inplace=inplace))
        self.head = nn.Linear(32, 10)
        self.log = log

    def forward(self, x):
        h = self.body(x)
        if self.log:  # planted: the classic masked log; the forward is finite, log's gradient at 0 is NaN
            r = torch.relu(h - 0.5)
            h = torch.where(r > 0, torch.log(r), torch.zeros_like(r)) + h
        return self.head(h)


def _fit(model, trainer=Trainer, **kw):
    return trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), kw.pop("data"),
                   epochs=1, batch_size=32, **kw).fit()


def test_an_inplace_write_to_a_saved_tensor_names_the_operation_and_the_module(digits):
    data = Subset(digits[0], range(64))
    with pytest.raises(OvertError) as caught:
        _fit(Net(inplace=True), data=data)
    text = str(caught.value)
    assert "modified in place" in text and "output of sigmoid" in text and "[32,32]" in text
    assert "modules with inplace=True: body.2" in text
    assert "debug_anomaly=true" in text and "set_detect_anomaly" in text
    assert _fit(Net(inplace=False), data=data)["steps"] == 2  # the clean twin trains


def test_debug_anomaly_names_the_first_operation_that_produced_nan(digits):
    data = Subset(digits[0], range(64))
    # PyTorch's anomaly mode warns with the forward line; overt's error names the operation and the fix
    with pytest.raises(OvertError) as caught, pytest.warns(UserWarning, match="Error detected in LogBackward0"):
        _fit(Net(inplace=False, log=True), trainer=overt.Trainer, data=data, debug_anomaly=True, guards=False,
             progress="off")
    text = str(caught.value)
    assert "backward produced NaN: log (backward node LogBackward0)" in text and "log(x + 1e-8)" in text
    assert not torch.is_anomaly_enabled()  # restored after the run
    # the clean twin: anomaly mode on, nothing raised, and off again afterwards
    assert _fit(Net(inplace=False), trainer=overt.Trainer, data=data, debug_anomaly=True, progress="off")["steps"] == 2
    assert not torch.is_anomaly_enabled()
