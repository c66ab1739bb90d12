"""``--fix``: apply the edits of fixable hits (mechanical rewrites that cannot change meaning)."""

from __future__ import annotations

from overt.lint.rules import Edit, Hit


def _offset(lines: list[str], line: int, col_bytes: int) -> int:
    """Character offset in the joined text of (1-based line, UTF-8 byte column)."""
    before = sum(len(text) for text in lines[: line - 1])
    text = lines[line - 1] if line - 1 < len(lines) else ""
    return before + len(text.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))


def apply_fixes(source: str, hits: list[Hit]) -> tuple[str, list[Hit]]:
    """Return the fixed source and the hits whose edits were applied
    (edits that overlap an earlier one are skipped and stay reported)."""
    lines = source.splitlines(keepends=True)
    spans: list[tuple[int, int, str, Hit]] = []
    for hit in hits:
        for e in hit.edits:
            spans.append((_offset(lines, e.line, e.col), _offset(lines, e.end_line, e.end_col), e.text, hit))
    spans.sort(key=lambda s: (s[0], s[1]))
    chosen: list[tuple[int, int, str, Hit]] = []
    last_end = -1
    for s in spans:
        if s[0] >= last_end:
            chosen.append(s)
            last_end = s[1]
    out = source
    for start, end, text, _ in reversed(chosen):
        out = out[:start] + text + out[end:]
    fixed: list[Hit] = []
    for *_, hit in chosen:
        if hit not in fixed:
            fixed.append(hit)
    return out, fixed


__all__ = ["apply_fixes", "Edit"]
