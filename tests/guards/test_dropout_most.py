"""dropout-drops-most (overt/guards/dropout.py, issue 33 w51): a keep probability passed as
dropout's p, as a layer and as a functional call; the correct twins stay quiet.  Small real runs
on digits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import evaluate, guarded, slugs, train


class Head(nn.Module):
    def __init__(self, dropout_keep_prob: float, as_p: bool, functional: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.features = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        p = dropout_keep_prob if as_p else 1 - dropout_keep_prob
        self.dropout = nn.Dropout(0.0 if functional else p)
        self.p = p
        self.functional = functional
        self.logits = nn.Linear(64, 10)

    def forward(self, x):
        h = self.features(x)
        h = F.dropout(h, self.p, training=self.training) if self.functional else self.dropout(h)
        return self.logits(h)


def _run(model):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=8)
    evaluate(model)
    return g.report()


def test_a_keep_probability_passed_to_a_dropout_layer_is_named_with_its_line():
    findings = _run(Head(1.0, as_p=True))
    assert slugs(findings) == ["dropout-drops-most"]
    f = findings[0]
    assert f.severity == "error" and "Head.dropout" in f.where and "test_dropout_most.py:" in f.where
    assert "p = 1 - keep_prob" in f.fix


def test_a_functional_dropout_dropping_most_is_a_warning_at_its_call():
    findings = _run(Head(0.8, as_p=True, functional=True))
    assert slugs(findings) == ["dropout-drops-most"]
    assert findings[0].severity == "warning" and "F.dropout at" in findings[0].where


def test_the_drop_probability_is_quiet():
    assert _run(Head(1.0, as_p=False)) == []
    assert _run(Head(0.8, as_p=False, functional=True)) == []


def test_a_compiled_functional_dropout_is_named_and_the_function_put_back():
    """A compiled model's functional dropout is still named (its looks run eagerly), and
    F.dropout is PyTorch's own again once training ends."""
    original = F.dropout
    model = Head(0.8, as_p=True, functional=True)
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(compiled, opt, steps=8)
    evaluate(compiled)
    train(compiled, opt, steps=2)
    torch._dynamo.reset()
    assert slugs(g.report()) == ["dropout-drops-most"]
    assert F.dropout is original
