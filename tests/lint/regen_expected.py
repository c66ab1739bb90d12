"""Rewrite tests/lint/fixtures/*/bad.txt from what lint finds now (a maintainer tool, not a test).

    python tests/lint/regen_expected.py

Review the diff: every line must match a `# BAD: slug` marker (test_fixtures checks that).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from overt.lint.engine import lint_file  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"

for path in sorted(FIXTURES.glob("*/bad*.py")) + sorted(FIXTURES.glob("*/bad.ipynb")):
    res = lint_file(path)
    if res.error:
        sys.exit(res.error)
    lines = []
    for f in res.findings:
        cell = f.details.get("cell")
        loc = f"cell {cell}:{f.line}:{f.col}" if cell else f"{f.line}:{f.col}"
        lines.append(f"{loc}: {f.code} {f.slug}")
    path.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print(f"{path.relative_to(FIXTURES)}: {len(lines)} findings")
