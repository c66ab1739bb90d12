"""The held-out split of the wild corpus (issue 33): a seeded draw of the new reports into a
development half and a test half, made before any of their cases was written.

    python -m tests.wild.split          # rewrites tests/wild/split.json (the same draw every time)

The 26 cases that existed before the draw (w01-w26) were built and tuned on, so they belong to the
development half.  The new reports (N01-N28, listed in docs/wild.md) are shuffled with
``random.Random(SEED)`` and the first half goes to development, the second to test.  Case modules
name their report id in ``REPORT`` so the runner can tell the halves apart.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 33
#: the 26 cases that existed before the draw: development by construction
OLD = [f"w{i:02d}" for i in range(1, 27)]
#: the new reports, in the order they were gathered
NEW = [f"N{i:02d}" for i in range(1, 29)]

PATH = Path(__file__).with_name("split.json")


def draw(seed: int = SEED) -> dict[str, list[str]]:
    """{"dev": [...], "test": [...]}: the old cases plus half the new reports, and the other half."""
    order = list(NEW)
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return {"seed": seed, "dev": OLD + sorted(order[:half]), "test": sorted(order[half:])}


def load() -> dict[str, list[str]]:
    """The committed split."""
    return json.loads(PATH.read_text())


if __name__ == "__main__":
    PATH.write_text(json.dumps(draw(), indent=1) + "\n")
    print(PATH.read_text())
