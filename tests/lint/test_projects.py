"""Realistic multi-file sample projects (tests/lint/projects/<name>/), each linted as a whole.

Each project's ``expected.txt`` lists every finding (``path:line:col: CODE slug``, path
relative to the project); each finding's line carries a ``# BAD: slug`` marker in the
source.  The failures sit one or more hops away from where they show: a model class in
another module, an attribute set in ``__init__``, a helper imported from ``utils``.
``clean_mnist`` uses the same hops correctly and must give nothing.  To rewrite an
expected file after a deliberate change: ``python tests/lint/test_projects.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

PROJECTS = Path(__file__).parent / "projects"
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from overt.lint import lint_paths  # noqa: E402
from overt.lint.config import LintConfig  # noqa: E402


def _render(project: Path) -> list[str]:
    findings, errors = lint_paths([project], LintConfig(root=project))
    assert errors == []
    return sorted(f"{Path(f.path).relative_to(project).as_posix()}:{f.line}:{f.col}: {f.code} {f.slug}"
                  for f in findings)


def _marked(project: Path) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(project.rglob("*.py")):
        for no, line in enumerate(path.read_text().splitlines(), start=1):
            m = re.search(r"# BAD: ([a-z0-9-]+)", line)
            if m:
                out.add((path.relative_to(project).as_posix(), no, m.group(1)))
    return out


@pytest.mark.parametrize("project", sorted(p for p in PROJECTS.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_project_gives_exactly_the_expected_findings(project: Path) -> None:
    expected = [line for line in (project / "expected.txt").read_text().splitlines() if line.strip()]
    assert _render(project) == expected
    found = {(e.split(":")[0], int(e.split(":")[1]), e.rsplit(" ", 1)[1]) for e in expected}
    assert found == _marked(project)


if __name__ == "__main__":
    for project in sorted(p for p in PROJECTS.iterdir() if p.is_dir()):
        lines = _render(project)
        (project / "expected.txt").write_text("".join(f"{line}\n" for line in lines))
        print(f"{project.name}: {len(lines)} findings")
