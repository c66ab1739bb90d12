"""overt's own code, recipes and examples lint clean (zero findings)."""

from __future__ import annotations

from pathlib import Path

from overt.lint import lint_paths
from overt.lint.config import LintConfig

REPO = Path(__file__).resolve().parents[2]


def test_overt_and_examples_have_no_findings():
    targets = [REPO / "overt"] + [REPO / d for d in ("examples",) if (REPO / d).is_dir()]
    findings, errors = lint_paths(targets, LintConfig(root=REPO))
    assert errors == []
    assert [f.where + " " + f.slug for f in findings] == []
