"""The wild corpus, every case through every face: recall and false positives per face.

    python -m tests.wild.runner            # all cases, all faces
    python -m tests.wild.runner w01 w07    # some cases
    python -m tests.wild.runner --faces lint,run

A case counts as *caught* by a face when that face reports one of the case's slugs on the
buggy script; any finding on the correct twin is a *false positive*.  "n/a": the face does
not apply to the case (no ``#@guard`` line, no ``setup()`` for the engine and doctor).
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.wild.harness import FACES, case_id, cases, caught, evaluate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.wild.runner")
    ap.add_argument("cases", nargs="*", help="case id prefixes (default: all)")
    ap.add_argument("--faces", default=",".join(FACES))
    args = ap.parse_args(argv)
    faces = tuple(f for f in args.faces.split(",") if f)
    chosen = [c for c in cases() if not args.cases or any(case_id(c).startswith(p) for p in args.cases)]
    stats = {f: {"caught": 0, "applies": 0, "fp": 0, "twins": 0} for f in faces}
    any_caught = 0
    print(f"{'case':38s} " + " ".join(f"{f:>8s}" for f in faces) + "   twin findings")
    for case in chosen:
        t0 = time.perf_counter()
        res = evaluate(case, faces)
        cells, fps = [], []
        hit = False
        for f in faces:
            bug, twin = res[f]["bug"], res[f]["twin"]
            if not bug.applies:
                cells.append("n/a")
                continue
            stats[f]["applies"] += 1
            stats[f]["twins"] += 1
            ok = caught(case, bug)
            hit |= ok
            stats[f]["caught"] += ok
            cells.append("CAUGHT" if ok else ("error" if bug.error else "-"))
            if twin.judged:
                stats[f]["fp"] += 1
                fps.append(f"{f}: {','.join(sorted(set(twin.judged)))}")
            elif twin.slugs and f != "doctor":
                fps.append(f"{f}: timing only ({','.join(sorted(set(twin.slugs)))})")
            if twin.error:
                fps.append(f"{f}: twin error {twin.error[-200:]!r}")
        any_caught += hit
        print(f"{case_id(case):38s} " + " ".join(f"{c:>8s}" for c in cells)
              + f"   {'; '.join(fps) or '-'}  ({time.perf_counter() - t0:.1f}s)", flush=True)
    print()
    print(f"{'face':8s} {'recall (of all cases)':>22s} {'recall (where it applies)':>26s} {'twins with findings':>20s}")
    n = len(chosen)
    for f in faces:
        s = stats[f]
        print(f"{f:8s} {s['caught']:>10d}/{n:<3d} {100 * s['caught'] / max(n, 1):5.1f}%"
              f" {s['caught']:>12d}/{s['applies']:<3d} {100 * s['caught'] / max(s['applies'], 1):5.1f}%"
              f" {s['fp']:>12d}/{s['twins']}")
    print(f"caught by at least one face: {any_caught}/{n} ({100 * any_caught / max(n, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
