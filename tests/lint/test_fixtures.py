"""TorchFix-style fixture tests: for each rule, bad.py with the expected findings
in bad.txt next to it, and ok.py (the tricky legal patterns) with none.  A rule
that follows values also has bad_hops.py / ok_hops.py: the same failure one hop
away (a variable, an attribute, a helper, a branch, a loop-carried value) and
its clean twins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from overt.catalog import ENTRIES
from overt.lint.engine import lint_file

FIXTURES = Path(__file__).parent / "fixtures"
STATIC = [e.slug for e in ENTRIES if e.static]
BAD = sorted(FIXTURES.glob("*/bad*.py")) + sorted(FIXTURES.glob("*/bad.ipynb"))
GOOD = sorted(FIXTURES.glob("*/ok*.py")) + sorted(FIXTURES.glob("clean/*.py")) + sorted(FIXTURES.glob("*/clean.ipynb"))


def _render(path: Path) -> list[str]:
    res = lint_file(path)
    assert res.error is None, res.error
    out = []
    for f in res.findings:
        cell = f.details.get("cell")
        loc = f"cell {cell}:{f.line}:{f.col}" if cell else f"{f.line}:{f.col}"
        out.append(f"{loc}: {f.code} {f.slug}")
    return out


@pytest.mark.parametrize("path", BAD, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bad_fixture_gives_exactly_the_expected_findings(path: Path) -> None:
    expected = path.with_suffix(".txt").read_text().split("\n")
    assert _render(path) == [line for line in expected if line.strip()]


@pytest.mark.parametrize("path", GOOD, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_legal_code_gives_no_findings(path: Path) -> None:
    assert _render(path) == []


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/bad*.py")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_marked_line_is_expected(path: Path) -> None:
    """Each `# BAD: slug` marker in a fixture is in its expected file, and nothing unmarked is."""
    marked = set()
    for no, line in enumerate(path.read_text().splitlines(), start=1):
        m = re.search(r"# BAD: ([a-z0-9-]+)", line)
        if m:
            marked.add((no, m.group(1)))
    found = set()
    for line in path.with_suffix(".txt").read_text().split("\n"):
        if line.strip():
            loc, _, rest = line.partition(": ")
            found.add((int(loc.split(":")[0]), rest.split()[1]))
    assert marked == found


@pytest.mark.parametrize("slug", STATIC)
def test_every_static_rule_has_positive_and_negative_fixtures(slug: str) -> None:
    folder = FIXTURES / slug
    assert (folder / "bad.py").is_file() and (folder / "ok.py").is_file()
    assert any(line.endswith(f" {slug}") for line in (folder / "bad.txt").read_text().splitlines())


def test_every_finding_states_its_fix_on_its_own() -> None:
    """JSON/SARIF consumers get the fix apart from the message (Finding.fix), for every rule."""
    seen = set()
    for path in BAD:
        for f in lint_file(path).findings:
            assert f.fix and f.fix in f.message and len(f.fix) > 12, (f.slug, f.fix)
            assert f.why
            seen.add(f.slug)
    assert seen == set(STATIC)
