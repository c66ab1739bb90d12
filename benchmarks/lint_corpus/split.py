"""Split the corpus's "new", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9", "fresh10" and "fresh11" projects into development and test halves by a seeded draw.

    python benchmarks/lint_corpus/split.py    # writes split.json, split-fresh.json, split-fresh2.json, split-fresh3.json, split-fresh4.json, split-fresh5.json, split-fresh6.json, split-fresh7.json, split-fresh8.json, split-fresh9.json, split-fresh10.json and split-fresh11.json beside this script

Held out means held out: the draw is made once, before any finding on these projects is read,
and committed with its seed.  Rules are built against the development half only; the test half
is measured once, at the end.  The slugs are sorted first, so the draw depends on the seed and
the set of projects alone, not on their order in manifest.json.  With an odd count the test half
gets the smaller share.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261126  # the day the draw was made (issue 30)
FRESH_SEED = 20261127  # the day the "fresh" projects' draw was made (issue 33)
FRESH2_SEED = 20261128  # the "fresh2" projects' draw (session 46)
FRESH3_SEED = 20261129  # the "fresh3" projects' draw (session 47)
FRESH4_SEED = 20261203  # the "fresh4" projects' draw (session 49)
FRESH5_SEED = 20261205  # the "fresh5" projects' draw (session 50)
FRESH6_SEED = 20261207  # the "fresh6" projects' draw (session 51)
FRESH7_SEED = 20261209  # the "fresh7" projects' draw (session 52)
FRESH8_SEED = 20261211  # the "fresh8" projects' draw (session 53)
FRESH9_SEED = 20261213  # the "fresh9" projects' draw (session 54)
FRESH10_SEED = 20261215  # the "fresh10" projects' draw (session 55)
FRESH11_SEED = 20261217  # the "fresh11" projects' draw (session 56)


def draw(slugs: list[str], seed: int = SEED) -> dict[str, list[str]]:
    """Return {"dev": [...], "test": [...]} for ``slugs``, drawn with ``seed``."""
    order = sorted(slugs)
    random.Random(seed).shuffle(order)
    n_test = len(order) // 2
    return {"seed": seed, "test": sorted(order[:n_test]), "dev": sorted(order[n_test:])}


def main() -> int:
    projects = json.loads((HERE / "manifest.json").read_text())["projects"]
    for group, seed, name in (("new", SEED, "split.json"), ("fresh", FRESH_SEED, "split-fresh.json"),
                              ("fresh2", FRESH2_SEED, "split-fresh2.json"),
                              ("fresh3", FRESH3_SEED, "split-fresh3.json"),
                              ("fresh4", FRESH4_SEED, "split-fresh4.json"),
                              ("fresh5", FRESH5_SEED, "split-fresh5.json"),
                              ("fresh6", FRESH6_SEED, "split-fresh6.json"),
                              ("fresh7", FRESH7_SEED, "split-fresh7.json"),
                              ("fresh8", FRESH8_SEED, "split-fresh8.json"),
                              ("fresh9", FRESH9_SEED, "split-fresh9.json"),
                              ("fresh10", FRESH10_SEED, "split-fresh10.json"),
                              ("fresh11", FRESH11_SEED, "split-fresh11.json")):
        halves = draw([p["slug"] for p in projects if p.get("group") == group], seed)
        (HERE / name).write_text(json.dumps(halves, indent=2) + "\n")
        print(f"{group}, seed {halves['seed']}: dev {len(halves['dev'])} {halves['dev']}\n"
              f"            test {len(halves['test'])} {halves['test']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
