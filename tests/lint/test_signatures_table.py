"""The parameter lists lint checks calls against (``argument-in-wrong-slot``, OVT420) are the installed
libraries' own: ``overt/lint/analysis/signatures_data.py`` is introspected by ``scripts/lint_signatures.py``
and lint itself never imports torch."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys

import pytest

from overt.lint.analysis.signatures_data import SIGNATURES
from overt.lint.analysis.slots import signature_of
from overt.lint.index import FileIndex

torch = pytest.importorskip("torch")


def _positional(func, drop_self: bool) -> tuple[str, ...]:
    names = [p.name for p in inspect.signature(func).parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return tuple(names[1:] if drop_self else names)


@pytest.mark.parametrize(("key", "func", "drop_self"), [
    ("torch.optim.SGD", torch.optim.SGD.__init__, True),
    ("torch.optim.Adam", torch.optim.Adam.__init__, True),
    ("torch.nn.Conv2d", torch.nn.Conv2d.__init__, True),
    ("torch.nn.MaxPool2d", torch.nn.MaxPool2d.__init__, True),
    ("torch.nn.BCEWithLogitsLoss.forward", torch.nn.BCEWithLogitsLoss.forward, True),
    ("torch.nn.functional.binary_cross_entropy", torch.nn.functional.binary_cross_entropy, False),
    ("torch.nn.functional.interpolate", torch.nn.functional.interpolate, False),
    ("torch.optim.lr_scheduler.StepLR", torch.optim.lr_scheduler.StepLR.__init__, True),
])
def test_table_agrees_with_the_installed_torch(key, func, drop_self):
    assert SIGNATURES[key][0] == _positional(func, drop_self)


def test_table_agrees_with_the_installed_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    for name in ("roc_auc_score", "precision_score", "average_precision_score"):
        assert SIGNATURES[f"sklearn.metrics.{name}"][0] == _positional(getattr(metrics, name), False)


def test_lint_resolves_a_call_without_importing_torch():
    """In a fresh interpreter: resolving ``torch.optim.SGD(...)`` against the table imports no torch."""
    code = ("import ast, sys; from overt.lint.index import FileIndex; from overt.lint.analysis.slots import "
            "signature_of; src = 'import torch\\ntorch.optim.SGD(p, lr, wd)\\n'; ix = FileIndex.build("
            "ast.parse(src), src); call = ix.calls[0]; s = signature_of(ix, call); "
            "print(s.positional[:3], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "('params', 'lr', 'momentum') False", out.stderr


def test_callees_the_file_defines():
    src = '''
import torch
class Base:
    def __init__(self, a, b): pass
    def run(self, loader, criterion): pass
class Child(Base):
    def __init__(self, a, b):
        super().__init__(a, b)
        Base.__init__(self, a, b)
        self.run(a, b)
def helper(model, loader, *rest): pass
helper(1, 2)
Child(1, 2)
'''
    ix = FileIndex.build(ast.parse(src), src)
    found = {ast.unparse(c.func): signature_of(ix, c) for c in ix.calls}
    assert found["super().__init__"].positional == ("a", "b")
    assert found["Base.__init__"].positional == ("<self>", "a", "b")
    assert found["self.run"].positional == ("loader", "criterion")
    assert found["helper"].positional == ("model", "loader") and found["helper"].star
    assert found["Child"].positional == ("a", "b")
