"""The wild corpus, every case through every face: recall and false positives per face, and per
half of the held-out split (issue 33).

    python -m tests.wild.runner                       # all cases, all faces
    python -m tests.wild.runner w01 w07               # some cases
    python -m tests.wild.runner --faces lint,run      # as a user runs them: overt run / overt lint
    python -m tests.wild.runner --faces run,lint --half dev --markdown out.md
    python -m tests.wild.runner --faces run,lint --half dev2      # round two's development half
    python -m tests.wild.runner --faces run,lint --half dev3      # round three's development half
    python -m tests.wild.runner --faces run,lint --half dev4      # round four's development half
    python -m tests.wild.runner --faces run,lint --half dev5      # round five's development half
    python -m tests.wild.runner --faces run,lint --half dev6      # round six's development half
    python -m tests.wild.runner --faces run,lint --half dev7      # round seven's development half
    python -m tests.wild.runner --faces run,lint --half dev8      # round eight's development half
    python -m tests.wild.runner --faces run,lint --half dev9      # round nine's development half
    python -m tests.wild.runner --faces run,lint --half dev10     # round ten's development half
    python -m tests.wild.runner --faces run,lint --half dev11     # round eleven's development half
    python -m tests.wild.runner --faces run,lint --half test15    # round fifteen's test half
    python -m tests.wild.runner --faces run,lint --half test16    # round sixteen's test half
    python -m tests.wild.runner --faces run,lint --half test17    # round seventeen's test half (measured in session 52)
    python -m tests.wild.runner --faces run,lint --half test18    # round eighteen's test half (measured in session 53)
    python -m tests.wild.runner --faces run,lint --half test19    # round nineteen's test half (measured in session 54)
    python -m tests.wild.runner --faces run,lint --half test20    # round twenty's test half (measured in session 55)
    python -m tests.wild.runner --faces run,lint --half test21    # round twenty-one's test half (measured in session 56)

A case counts as *caught* by a face when that face reports a slug that names the case's cause
(its ``SLUGS``, or the slugs ``tests/wild/mechanisms.json`` gives its ``MECHANISM``); a finding
with another slug on the buggy script is a *symptom-only* detection, counted apart; any finding on
the correct twin is a *false positive* (timing findings aside).  "n/a": the face does not apply
to the case (no ``#@guard`` line, no ``setup()`` for the engine and doctor).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from tests.wild.harness import FACES, case_id, cases, caught, evaluate, half, report_id, verdict


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30,
                             cwd=Path(__file__).parent)
        return out.stdout.strip() or "?"
    except OSError:
        return "?"


#: halves not measured yet: left out of the default selection (``--half all``), so nobody building
#: checks sees them by running the whole corpus; run only with ``--half`` naming them (the lead, once).
#: Round five's halves were measured on 2026-11-26, round six's to round nine's on 2026-11-27 (docs/wild.md);
#: round ten's to round thirteen's halves were measured on 2026-11-27 too (round eleven in session 46, round
#: twelve in session 47, round thirteen in session 48); round fourteen's on 2026-11-28 (session 49). A new round's
#: halves are listed here, in its split commit, until the lead measures them: round fifteen's (drawn 2026-11-28,
#: docs/wild.md "Issue 33, round fifteen") were, until the lead measured its test half in session 50; round
#: sixteen's (drawn 2026-11-28, docs/wild.md "Issue 33, round sixteen") were, until the lead measured both halves
#: in session 51; round seventeen's (drawn 2026-11-28, docs/wild.md "Issue 33, round seventeen") were, until the
#: lead measured both halves in session 52; round eighteen's (drawn 2026-11-28, docs/wild.md "Issue 33, round
#: eighteen") were, until the lead measured both halves in session 53; round nineteen's (drawn 2026-11-28,
#: docs/wild.md "Issue 33, round nineteen") were, until the lead measured both halves in session 54; round twenty's
#: (drawn 2026-11-28, docs/wild.md "Issue 33, round twenty") were, until the lead measured both halves in session 55;
#: round twenty-one's (drawn 2026-11-28, docs/wild.md "Issue 33, round twenty-one") were, until the lead measured both
#: halves in session 56.
UNMEASURED: tuple[str, ...] = ()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.wild.runner")
    ap.add_argument("cases", nargs="*", help="case id prefixes (default: all)")
    ap.add_argument("--faces", default=",".join(FACES))
    ap.add_argument("--half", choices=("dev", "test", "dev2", "test2", "dev3", "test3", "dev4", "test4",
                                       "dev5", "test5", "dev6", "test6", "dev7", "test7", "dev8", "test8",
                                       "dev9", "test9", "dev10", "test10", "dev11", "test11", "dev12",
                                       "test12", "dev13", "test13", "dev14", "test14", "dev15",
                                       "test15", "dev16", "test16", "dev17", "test17", "dev18",
                                       "test18", "dev19", "test19", "dev20", "test20",
                                       "dev21", "test21", "all"),
                    default="all",
                    help="the half of the held-out split to run (tests/wild/split.json): dev/test for round "
                         "one (w01-w54), dev2/test2 for round two, dev3/test3 for round three, dev4/test4 for "
                         "round four, dev5/test5 for round five, dev6/test6 for round six, dev7/test7 for round seven, "
                         "dev8/test8 for round eight, dev9/test9 for round nine, dev10/test10 for round ten, "
                         "dev11/test11 for round eleven, dev12/test12 for round twelve, dev13/test13 for round "
                         "thirteen, dev14/test14 for round fourteen, dev15/test15 for round fifteen, dev16/test16 for "
                         "round sixteen, dev17/test17 for round seventeen, dev18/test18 for round eighteen, "
                         "dev19/test19 for round nineteen, dev20/test20 for round twenty, dev21/test21 for round "
                         "twenty-one (a new round is left out of 'all' until measured: UNMEASURED)")
    ap.add_argument("--markdown", help="also write the per-case and per-half tables to this file")
    args = ap.parse_args(argv)
    faces = tuple(f for f in args.faces.split(",") if f)
    chosen = [c for c in cases() if (not args.cases or any(case_id(c).startswith(p) for p in args.cases))
              and (args.half == half(c) or (args.half == "all" and half(c) not in UNMEASURED))]
    stats = {f: {"caught": 0, "applies": 0, "fp": 0, "twins": 0} for f in faces}
    halves: dict[str, dict[str, int]] = {}
    rows = []
    any_caught = 0
    print(f"{'case':38s} {'half':5s} " + " ".join(f"{f:>8s}" for f in faces)
          + "   verdict  bug findings | twin findings")
    for case in chosen:
        t0 = time.perf_counter()
        res = evaluate(case, faces)
        cells, fps, bug_slugs = [], [], set()
        hit = twin_fp = False
        for f in faces:
            bug, twin = res[f]["bug"], res[f]["twin"]
            if not bug.applies:
                cells.append("n/a")
                continue
            bug_slugs |= set(bug.judged)
            stats[f]["applies"] += 1
            stats[f]["twins"] += 1
            ok = caught(case, bug)
            hit |= ok
            stats[f]["caught"] += ok
            cells.append("CAUGHT" if ok else ("error" if bug.error else ("other" if bug.judged else "-")))
            if twin.judged:
                stats[f]["fp"] += 1
                twin_fp = True
                fps.append(f"{f}: {','.join(sorted(set(twin.judged)))}")
            elif twin.slugs and f != "doctor":
                fps.append(f"{f}: timing only ({','.join(sorted(set(twin.slugs)))})")
            if twin.error:
                fps.append(f"{f}: twin error {twin.error[-200:]!r}")
        v = verdict(case, [res[f]["bug"] for f in faces if res[f]["bug"].applies])
        h = half(case)
        tally = halves.setdefault(h, {"cases": 0, "cause": 0, "symptom": 0, "twin_fp": 0})
        tally["cases"] += 1
        if v != "-":
            tally[v] += 1
        tally["twin_fp"] += twin_fp
        any_caught += hit
        rows.append((case, h, cells, v, sorted(bug_slugs), fps))
        print(f"{case_id(case):38s} {h:5s} " + " ".join(f"{c:>8s}" for c in cells)
              + f"   {v:7s}  {','.join(sorted(bug_slugs)) or '-'} | {'; '.join(fps) or '-'}"
              + f"  ({time.perf_counter() - t0:.1f}s)", flush=True)
    print()
    print(f"{'face':8s} {'recall (of all cases)':>22s} {'recall (where it applies)':>26s} {'twins with findings':>20s}")
    n = len(chosen)
    for f in faces:
        s = stats[f]
        print(f"{f:8s} {s['caught']:>10d}/{n:<3d} {100 * s['caught'] / max(n, 1):5.1f}%"
              f" {s['caught']:>12d}/{s['applies']:<3d} {100 * s['caught'] / max(s['applies'], 1):5.1f}%"
              f" {s['fp']:>12d}/{s['twins']}")
    print(f"caught by at least one face: {any_caught}/{n} ({100 * any_caught / max(n, 1):.1f}%)")
    print()
    print(f"{'half':5s} {'cases':>6s} {'cause':>6s} {'symptom only':>13s} {'twins with findings':>20s}")
    for h, t in sorted(halves.items()):
        print(f"{h:5s} {t['cases']:>6d} {t['cause']:>6d} {t['symptom']:>13d} {t['twin_fp']:>20d}")
    if args.markdown:
        _write_markdown(Path(args.markdown), faces, rows, halves)
    return 0


def _write_markdown(path: Path, faces: tuple[str, ...], rows: list, halves: dict) -> None:
    lines = [f"commit `{_commit()}`, faces {', '.join(faces)}", "",
             "| case | report | half | " + " | ".join(faces)
             + " | verdict | findings on the bug | findings on the twin |",
             "|---|---|---|" + "---|" * len(faces) + "---|---|---|"]
    for case, h, cells, v, bug_slugs, fps in rows:
        lines.append(f"| {case_id(case)} | {report_id(case)} | {h} | " + " | ".join(cells)
                     + f" | {v} | {', '.join(bug_slugs) or '-'} | {'; '.join(fps) or '-'} |")
    lines += ["", "| half | cases | detected by the slug naming the cause | symptom only | twins with findings |",
              "|---|---|---|---|---|"]
    for h, t in sorted(halves.items()):
        lines.append(f"| {h} | {t['cases']} | {t['cause']} | {t['symptom']} | {t['twin_fp']} |")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
