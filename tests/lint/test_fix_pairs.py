"""Every fixable rule has a before/after pair: ``--fix`` turns fix_before.py into
exactly fix_after.py, and the rule is silent on the result."""

from __future__ import annotations

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
    assert hits and all(h.edits for h in hits)
    fixed, done = apply_fixes(before, hits)
    assert fixed == after
    assert len(done) == len(hits)
    assert lint_source(after, "fix_after.py", {slug}) == []
