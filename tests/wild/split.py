"""The held-out splits of the wild corpus (issue 33): seeded draws of new reports into a
development half and a test half, each made before any of its cases was written.

    python -m tests.wild.split          # rewrites tests/wild/split.json (the same draws every time)

Round one: the 26 cases that existed before the first draw (w01-w26) were built and tuned on, so
they belong to the development half.  The reports N01-N28 (listed in docs/wild.md) are shuffled
with ``random.Random(SEED)``; the first half goes to development (``dev``), the second to test
(``test``).  The round-one test half was measured once and is used up.

Round two: the reports N29-N52 (docs/wild.md, "Issue 33, round two"), gathered after the
round-one measurement, are shuffled with ``random.Random(SEED2)`` into ``dev2`` and ``test2``.
The checks built for issue 33 were built against w01-w54 only, so both round-two halves are
fresh; ``test2`` is measured once, by the lead, after merging.  The round-one keys are written
exactly as before, so they stay reproducible.

Round three: the reports N53-N76 (docs/wild.md, "Issue 33, round three"), gathered after round
two's test half was measured, are shuffled with ``random.Random(SEED3)`` into ``dev3`` and
``test3`` (12 and 12).  Rounds one and two's keys are written exactly as before.

Round four: the reports N77-N100 (docs/wild.md, "Issue 33, round four"), gathered after round
three's test half was measured, are shuffled with ``random.Random(SEED4)`` into ``dev4`` and
``test4`` (12 and 12).  The keys of rounds one to three are written exactly as before.

Round five: the reports N101-N124 (docs/wild.md, "Issue 33, round five"), gathered after round
four's test half was measured, are shuffled with ``random.Random(SEED5)`` into ``dev5`` and
``test5`` (12 and 12).  The keys of rounds one to four are written exactly as before.

Round six: the reports N125-N148 (docs/wild.md, "Issue 33, round six"), gathered after round five
was measured, are shuffled with ``random.Random(SEED6)`` into ``dev6`` and ``test6`` (12 and 12).
The keys of rounds one to five are written exactly as before.

Round seven: the reports N149-N168 (docs/wild.md, "Issue 33, round seven"), gathered after round six
was measured, are shuffled with ``random.Random(SEED7)`` into ``dev7`` and ``test7`` (10 and 10).
The keys of rounds one to six are written exactly as before.

Round eight: the reports N169-N188 (docs/wild.md, "Issue 33, round eight"), gathered after round seven
was measured, are shuffled with ``random.Random(SEED8)`` into ``dev8`` and ``test8`` (10 and 10).
The keys of rounds one to seven are written exactly as before.

Round nine: the reports N189-N208 (docs/wild.md, "Issue 33, round nine"), gathered after round eight
was measured, are shuffled with ``random.Random(SEED9)`` into ``dev9`` and ``test9`` (10 and 10).
The keys of rounds one to eight are written exactly as before.

Round ten: the reports N209-N228 (docs/wild.md, "Issue 33, round ten"), gathered after round nine
was measured, are shuffled with ``random.Random(SEED10)`` into ``dev10`` and ``test10`` (10 and 10).
The keys of rounds one to nine are written exactly as before.

Round eleven: the reports N229-N248 (docs/wild.md, "Issue 33, round eleven"), gathered after round ten
was measured, are shuffled with ``random.Random(SEED11)`` into ``dev11`` and ``test11`` (10 and 10).
The keys of rounds one to ten are written exactly as before.

Round twelve: the reports N249-N268 (docs/wild.md, "Issue 33, round twelve"), gathered after round
eleven was measured, are shuffled with ``random.Random(SEED12)`` into ``dev12`` and ``test12`` (10 and
10).  The keys of rounds one to eleven are written exactly as before.

Round thirteen: the reports N269-N288 (docs/wild.md, "Issue 33, round thirteen"), gathered after round
twelve was measured, are shuffled with ``random.Random(SEED13)`` into ``dev13`` and ``test13`` (10 and
10).  The keys of rounds one to twelve are written exactly as before.

Round fourteen: the reports N289-N308 (docs/wild.md, "Issue 33, round fourteen"), gathered after round
thirteen was drawn, are shuffled with ``random.Random(SEED14)`` into ``dev14`` and ``test14`` (10 and
10).  The keys of rounds one to thirteen are written exactly as before.

Round fifteen: the reports N309-N328 (docs/wild.md, "Issue 33, round fifteen"), gathered after round
fourteen was drawn, are shuffled with ``random.Random(SEED15)`` into ``dev15`` and ``test15`` (10 and
10).  The keys of rounds one to fourteen are written exactly as before.

Round sixteen: the reports N329-N348 (docs/wild.md, "Issue 33, round sixteen"), gathered after round
fifteen was drawn, are shuffled with ``random.Random(SEED16)`` into ``dev16`` and ``test16`` (10 and
10).  The keys of rounds one to fifteen are written exactly as before.

Round seventeen: the reports N349-N368 (docs/wild.md, "Issue 33, round seventeen"), gathered after round
sixteen was measured, are shuffled with ``random.Random(SEED17)`` into ``dev17`` and ``test17`` (10 and
10).  The keys of rounds one to sixteen are written exactly as before.

Round eighteen: the reports N369-N388 (docs/wild.md, "Issue 33, round eighteen"), gathered after round
seventeen was measured, are shuffled with ``random.Random(SEED18)`` into ``dev18`` and ``test18`` (10 and
10).  The keys of rounds one to seventeen are written exactly as before.

Round nineteen: the reports N389-N408 (docs/wild.md, "Issue 33, round nineteen"), gathered after round
eighteen was measured, are shuffled with ``random.Random(SEED19)`` into ``dev19`` and ``test19`` (10 and
10).  The keys of rounds one to eighteen are written exactly as before.

Round twenty: the reports N409-N428 (docs/wild.md, "Issue 33, round twenty"), gathered after round
nineteen was measured, are shuffled with ``random.Random(SEED20)`` into ``dev20`` and ``test20`` (10 and
10).  The keys of rounds one to nineteen are written exactly as before.

Round twenty-one: the reports N429-N448 (docs/wild.md, "Issue 33, round twenty-one"), gathered after round
twenty was measured, are shuffled with ``random.Random(SEED21)`` into ``dev21`` and ``test21`` (10 and
10).  The keys of rounds one to twenty are written exactly as before.

Case modules name their report id in ``REPORT`` so the runner can tell the halves apart.
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

SEED2 = 3302
#: the round-two reports, in the order they were gathered (docs/wild.md, "Issue 33, round two")
NEW2 = [f"N{i:02d}" for i in range(29, 53)]

SEED3 = 3303
#: the round-three reports, in the order they were gathered (docs/wild.md, "Issue 33, round three")
NEW3 = [f"N{i:02d}" for i in range(53, 77)]

SEED4 = 3404
#: the round-four reports, in the order they were gathered (docs/wild.md, "Issue 33, round four")
NEW4 = [f"N{i:02d}" for i in range(77, 101)]

SEED5 = 3505
#: the round-five reports, in the order they were gathered (docs/wild.md, "Issue 33, round five")
NEW5 = [f"N{i:02d}" for i in range(101, 125)]

SEED6 = 3606
#: the round-six reports, in the order they were gathered (docs/wild.md, "Issue 33, round six")
NEW6 = [f"N{i:02d}" for i in range(125, 149)]

SEED7 = 3707
#: the round-seven reports, in the order they were gathered (docs/wild.md, "Issue 33, round seven")
NEW7 = [f"N{i:02d}" for i in range(149, 169)]

SEED8 = 3808
#: the round-eight reports, in the order they were gathered (docs/wild.md, "Issue 33, round eight")
NEW8 = [f"N{i:02d}" for i in range(169, 189)]

SEED9 = 3909
#: the round-nine reports, in the order they were gathered (docs/wild.md, "Issue 33, round nine")
NEW9 = [f"N{i:02d}" for i in range(189, 209)]

SEED10 = 3910
#: the round-ten reports, in the order they were gathered (docs/wild.md, "Issue 33, round ten")
NEW10 = [f"N{i:02d}" for i in range(209, 229)]

SEED11 = 3911
#: the round-eleven reports, in the order they were gathered (docs/wild.md, "Issue 33, round eleven")
NEW11 = [f"N{i:02d}" for i in range(229, 249)]

SEED12 = 3912
#: the round-twelve reports, in the order they were gathered (docs/wild.md, "Issue 33, round twelve")
NEW12 = [f"N{i:02d}" for i in range(249, 269)]

SEED13 = 3913
#: the round-thirteen reports, in the order they were gathered (docs/wild.md, "Issue 33, round thirteen")
NEW13 = [f"N{i:02d}" for i in range(269, 289)]

SEED14 = 3914
#: the round-fourteen reports, in the order they were gathered (docs/wild.md, "Issue 33, round fourteen")
NEW14 = [f"N{i:02d}" for i in range(289, 309)]

SEED15 = 3915
#: the round-fifteen reports, in the order they were gathered (docs/wild.md, "Issue 33, round fifteen")
NEW15 = [f"N{i:02d}" for i in range(309, 329)]

SEED16 = 3916
#: the round-sixteen reports, in the order they were gathered (docs/wild.md, "Issue 33, round sixteen")
NEW16 = [f"N{i:02d}" for i in range(329, 349)]

SEED17 = 3917
#: the round-seventeen reports, in the order they were gathered (docs/wild.md, "Issue 33, round seventeen")
NEW17 = [f"N{i:02d}" for i in range(349, 369)]

SEED18 = 3918
#: the round-eighteen reports, in the order they were gathered (docs/wild.md, "Issue 33, round eighteen")
NEW18 = [f"N{i:02d}" for i in range(369, 389)]

SEED19 = 3919
#: the round-nineteen reports, in the order they were gathered (docs/wild.md, "Issue 33, round nineteen")
NEW19 = [f"N{i:02d}" for i in range(389, 409)]

SEED20 = 3920
#: the round-twenty reports, in the order they were gathered (docs/wild.md, "Issue 33, round twenty")
NEW20 = [f"N{i:02d}" for i in range(409, 429)]

SEED21 = 3921
#: the round-twenty-one reports, in the order they were gathered (docs/wild.md, "Issue 33, round twenty-one")
NEW21 = [f"N{i:02d}" for i in range(429, 449)]

PATH = Path(__file__).with_name("split.json")

#: the halves a case can belong to, in the order the runner lists them
HALVES = ("dev", "test", "dev2", "test2", "dev3", "test3", "dev4", "test4", "dev5", "test5", "dev6", "test6",
          "dev7", "test7", "dev8", "test8", "dev9", "test9", "dev10", "test10", "dev11", "test11",
          "dev12", "test12", "dev13", "test13", "dev14", "test14", "dev15", "test15",
          "dev16", "test16", "dev17", "test17", "dev18", "test18", "dev19", "test19",
          "dev20", "test20", "dev21", "test21")


def _halve(reports: list[str], seed: int) -> tuple[list[str], list[str]]:
    order = list(reports)
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return sorted(order[:half]), sorted(order[half:])


def draw(seed: int = SEED, seed2: int = SEED2, seed3: int = SEED3, seed4: int = SEED4,
         seed5: int = SEED5, seed6: int = SEED6, seed7: int = SEED7, seed8: int = SEED8,
         seed9: int = SEED9, seed10: int = SEED10, seed11: int = SEED11,
         seed12: int = SEED12, seed13: int = SEED13, seed14: int = SEED14,
         seed15: int = SEED15, seed16: int = SEED16, seed17: int = SEED17,
         seed18: int = SEED18, seed19: int = SEED19, seed20: int = SEED20,
         seed21: int = SEED21) -> dict:
    """Round one ({"dev", "test"}: the old cases plus half of N01-N28, and the other half), round
    two ({"dev2", "test2"}: the halves of N29-N52), round three ({"dev3", "test3"}: the halves of
    N53-N76), round four ({"dev4", "test4"}: the halves of N77-N100), round five ({"dev5",
    "test5"}: the halves of N101-N124), round six ({"dev6", "test6"}: the halves of N125-N148), round
    seven ({"dev7", "test7"}: the halves of N149-N168), round eight ({"dev8", "test8"}: the halves of
    N169-N188), round nine ({"dev9", "test9"}: the halves of N189-N208), round ten ({"dev10", "test10"}: the
    halves of N209-N228), round eleven ({"dev11", "test11"}: the halves of N229-N248), round twelve
    ({"dev12", "test12"}: the halves of N249-N268), round thirteen ({"dev13", "test13"}: the halves of
    N269-N288), round fourteen ({"dev14", "test14"}: the halves of N289-N308), round fifteen
    ({"dev15", "test15"}: the halves of N309-N328), round sixteen ({"dev16", "test16"}: the halves
    of N329-N348), round seventeen ({"dev17", "test17"}: the halves of N349-N368), round eighteen ({"dev18",
    "test18"}: the halves of N369-N388), round nineteen ({"dev19", "test19"}: the halves of N389-N408), round
    twenty ({"dev20", "test20"}: the halves of N409-N428) and round twenty-one ({"dev21", "test21"}: the halves
    of N429-N448)."""
    dev, test = _halve(NEW, seed)
    dev2, test2 = _halve(NEW2, seed2)
    dev3, test3 = _halve(NEW3, seed3)
    dev4, test4 = _halve(NEW4, seed4)
    dev5, test5 = _halve(NEW5, seed5)
    dev6, test6 = _halve(NEW6, seed6)
    dev7, test7 = _halve(NEW7, seed7)
    dev8, test8 = _halve(NEW8, seed8)
    dev9, test9 = _halve(NEW9, seed9)
    dev10, test10 = _halve(NEW10, seed10)
    dev11, test11 = _halve(NEW11, seed11)
    dev12, test12 = _halve(NEW12, seed12)
    dev13, test13 = _halve(NEW13, seed13)
    dev14, test14 = _halve(NEW14, seed14)
    dev15, test15 = _halve(NEW15, seed15)
    dev16, test16 = _halve(NEW16, seed16)
    dev17, test17 = _halve(NEW17, seed17)
    dev18, test18 = _halve(NEW18, seed18)
    dev19, test19 = _halve(NEW19, seed19)
    dev20, test20 = _halve(NEW20, seed20)
    dev21, test21 = _halve(NEW21, seed21)
    return {"seed": seed, "dev": OLD + dev, "test": test, "seed2": seed2, "dev2": dev2, "test2": test2,
            "seed3": seed3, "dev3": dev3, "test3": test3, "seed4": seed4, "dev4": dev4, "test4": test4,
            "seed5": seed5, "dev5": dev5, "test5": test5, "seed6": seed6, "dev6": dev6, "test6": test6,
            "seed7": seed7, "dev7": dev7, "test7": test7, "seed8": seed8, "dev8": dev8, "test8": test8,
            "seed9": seed9, "dev9": dev9, "test9": test9, "seed10": seed10, "dev10": dev10, "test10": test10,
            "seed11": seed11, "dev11": dev11, "test11": test11,
            "seed12": seed12, "dev12": dev12, "test12": test12,
            "seed13": seed13, "dev13": dev13, "test13": test13,
            "seed14": seed14, "dev14": dev14, "test14": test14,
            "seed15": seed15, "dev15": dev15, "test15": test15,
            "seed16": seed16, "dev16": dev16, "test16": test16,
            "seed17": seed17, "dev17": dev17, "test17": test17,
            "seed18": seed18, "dev18": dev18, "test18": test18,
            "seed19": seed19, "dev19": dev19, "test19": test19,
            "seed20": seed20, "dev20": dev20, "test20": test20,
            "seed21": seed21, "dev21": dev21, "test21": test21}


def load() -> dict:
    """The committed split."""
    return json.loads(PATH.read_text())


if __name__ == "__main__":
    PATH.write_text(json.dumps(draw(), indent=1) + "\n")
    print(PATH.read_text())
