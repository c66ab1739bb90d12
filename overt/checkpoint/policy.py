"""Which checkpoints to keep: the last K by step and the best K by a metric."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from overt.checkpoint.store import Entry


def to_keep(entries: list[Entry], keep_last: int | None, keep_best: int,
            mode: Literal["min", "max"] = "min", protect: Path | None = None) -> set[Path]:
    """Paths to keep among ``entries``: the newest ``keep_last`` (all when ``None``), the
    ``keep_best`` with the best recorded metric, and ``protect`` (the one just written)."""
    if keep_last is None:
        return {e.path for e in entries}
    by_step = sorted(entries, key=lambda e: e.step)
    keep = {e.path for e in by_step[-keep_last:]} if keep_last > 0 else set()
    scored = [e for e in entries if e.metric is not None]
    if keep_best > 0 and scored:
        # ties: the earlier checkpoint ranks first (it reached the value first)
        ranked = sorted(scored, key=lambda e: ((e.metric if mode == "min" else -e.metric), e.step))
        keep |= {e.path for e in ranked[:keep_best]}
    if protect is not None:
        keep.add(protect)
    return keep
