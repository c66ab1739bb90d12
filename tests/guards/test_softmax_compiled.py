"""softmax-over-batch with a model compiled by torch.compile's default backend (inductor, which
needs a C++ compiler on CPU): the softmax wrappers step aside while dynamo traces, so a compiled
forward's own softmax over its classes neither breaks the graph nor is judged, while a softmax over
the batch applied to the compiled model's outputs in an evaluation loop is still named at its line.
Marked slow: each compilation takes seconds on two cores (issue 32's list: checked before with
the eager backend only)."""

from __future__ import annotations

import shutil

import pytest
import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs, val_batches

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                       reason="inductor on CPU needs a C++ compiler"),
]


class _LogSoftmaxHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.net(x), dim=-1)


def _run(outer_dim: int) -> tuple[list, str]:
    torch._dynamo.reset()
    model = _LogSoftmaxHead()
    compiled = torch.compile(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    x, y = digits()
    gen = torch.Generator().manual_seed(0)
    for _ in range(8):
        idx = torch.randint(1400, (32,), generator=gen)
        loss = nn.functional.nll_loss(compiled(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    compiled.eval()
    with torch.inference_mode():
        for xb, _ in val_batches(32):
            torch.softmax(compiled(xb), dim=outer_dim).argmax(1)
    compiled.train()
    torch._dynamo.reset()
    return g.report(), g.session.options.stream.getvalue()


def test_a_softmax_over_the_batch_of_a_compiled_models_outputs_is_named():
    findings, text = _run(outer_dim=0)
    assert slugs(findings) == ["softmax-over-batch"], text
    assert "test_softmax_compiled.py:" in findings[0].where


def test_a_compiled_models_own_softmax_over_classes_is_quiet():
    findings, text = _run(outer_dim=1)
    assert findings == [], text
