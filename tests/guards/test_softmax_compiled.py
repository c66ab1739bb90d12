"""softmax-over-batch with a model compiled by torch.compile's default backend (inductor, which
needs a C++ compiler on CPU): the softmax wrappers step aside while dynamo traces, so a compiled
forward's own softmax over its classes neither breaks the graph nor is judged, while a softmax over
the batch applied to the compiled model's outputs in an evaluation loop is still named at its line.
Marked slow: each compilation takes seconds on two cores (issue 32's list: checked before with
the eager backend only).  The case is tests/guards/compiled_cases.py's, run here with inductor."""

from __future__ import annotations

import shutil

import pytest
import torch

from tests.guards import compiled_cases as cases
from tests.guards.helpers import slugs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                       reason="inductor on CPU needs a C++ compiler"),
]


def _run(outer_dim: int) -> tuple[list, str]:
    torch._dynamo.reset()
    g = cases.softmax_over_batch(cases.compiled("inductor"), planted=outer_dim == 0)
    findings = g.report()
    torch._dynamo.reset()
    return findings, g.session.options.stream.getvalue()


def test_a_softmax_over_the_batch_of_a_compiled_models_outputs_is_named():
    findings, text = _run(outer_dim=0)
    assert slugs(findings) == ["softmax-over-batch"], text
    assert "compiled_cases.py:" in findings[0].where, text
    assert "evaluation outputs" in findings[0].message, text  # not matched by shape on a training output


def test_a_compiled_models_own_softmax_over_classes_is_quiet():
    findings, text = _run(outer_dim=1)
    assert findings == [], text
