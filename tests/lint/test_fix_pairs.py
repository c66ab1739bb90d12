"""Every fixable rule has a before/after pair: ``--fix`` turns fix_before.py into
exactly fix_after.py, the rule is silent on the result (or keeps only the hits it must not
rewrite), and the fixed program runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from overt.lint.engine import lint_source
from overt.lint.fix import apply_fixes
from overt.lint.rules import FIXABLE

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("slug", sorted(FIXABLE))
def test_fix_turns_before_into_after(slug: str) -> None:
    before = (FIXTURES / slug / "fix_before.py").read_text()
    after = (FIXTURES / slug / "fix_after.py").read_text()
    hits = lint_source(before, "fix_before.py", {slug})
    fixable = [h for h in hits if h.edits]
    assert fixable
    fixed, done = apply_fixes(before, hits)
    assert fixed == after
    assert len(done) == len(fixable)
    left = lint_source(after, "fix_after.py", {slug})
    assert [(h.slug, h.severity) for h in left] == [(h.slug, h.severity) for h in hits if not h.edits]


@pytest.mark.parametrize("slug", sorted(FIXABLE))
def test_the_fixed_program_runs(slug: str, tmp_path: Path) -> None:
    """A fix is only a fix if the program still works: run fix_after.py (torch, CPU)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, str(FIXTURES / slug / "fix_after.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
