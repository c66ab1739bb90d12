"""Every guard gives its finding's ``fix`` as a field (not parsed back out of the message)."""

from __future__ import annotations

import ast
from pathlib import Path

import torch
import torch.nn.functional as F

from .helpers import batches, guarded, mlp

GUARDS = Path(__file__).resolve().parents[2] / "overt" / "guards"


def test_a_planted_bug_gives_its_fix_as_a_field_and_prints_it_after_fix():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    for xb, yb in batches(32, 6):
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.zero_grad()  # misplaced: wipes the gradients
        opt.step()
    finding = next(f for f in g.report() if f.slug == "zero-grad-misplaced")
    assert finding.fix.startswith("order the loop as zero_grad()")
    assert finding.message.endswith(f" Fix: {finding.fix}")
    assert finding.to_dict()["fix"] == finding.fix and finding.why


def test_every_report_and_stop_call_in_the_guards_passes_fix():
    missing = []
    for path in sorted(GUARDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("report", "stop") and len(node.args) >= 2
                    and "fix" not in {k.arg for k in node.keywords}):
                missing.append(f"{path.name}:{node.lineno}")
    assert missing == []
