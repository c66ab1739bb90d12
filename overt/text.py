"""Small text helpers shared by the messages of every face."""

from __future__ import annotations

from typing import Sequence


def first_names(names: Sequence[str], limit: int = 6) -> str:
    """``"a, b, c and 4 more"``: the first ``limit`` names, and how many were left out."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
