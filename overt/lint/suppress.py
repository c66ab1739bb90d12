"""Per-line and per-file silencing comments.

- ``# overt: ignore[slug, OVT101]`` silences those rules on that line;
  ``# overt: ignore`` silences every rule on the line.
- ``# noqa: OVT101`` (flake8 style) silences those codes; a bare ``# noqa`` all.
- ``# overt: ignore-file[slug]`` anywhere in a file silences a rule for the
  whole file (``# overt: ignore-file`` silences every rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from overt.catalog import lookup

_OVERT = re.compile(r"#\s*overt:\s*ignore(-file)?(?:\[([^\]]*)\])?", re.I)
_NOQA = re.compile(r"#\s*noqa(?::\s*([A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)

ALL = "*"


def _slugs(text: str | None) -> set[str]:
    if not text:
        return {ALL}
    out = set()
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        try:
            out.add(lookup(part).slug)
        except KeyError:
            out.add(part)  # a code of another tool (noqa: E501): harmless
    return out or {ALL}


@dataclass
class Suppressions:
    """Which slugs are silenced on which lines, and for the whole file."""

    lines: dict[int, set[str]] = field(default_factory=dict)
    file: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, lines: list[str]) -> "Suppressions":
        sup = cls()
        for no, line in enumerate(lines, start=1):
            if "#" not in line:
                continue
            low = line.lower()
            if "overt" in low:
                for m in _OVERT.finditer(line):
                    target = sup.file if m.group(1) else sup.lines.setdefault(no, set())
                    target |= _slugs(m.group(2))
            if "noqa" in low:
                m = _NOQA.search(line)
                if m:
                    sup.lines.setdefault(no, set()).update(_slugs(m.group(1)))
        return sup

    def silenced(self, slug: str, line: int) -> bool:
        if ALL in self.file or slug in self.file:
            return True
        on_line = self.lines.get(line)
        return bool(on_line) and (ALL in on_line or slug in on_line)
