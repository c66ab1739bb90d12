"""Which forward-observing guards fire on a planted bug when the model is called eagerly and when
it is called through ``torch.compile`` (the cases of tests/guards/compiled_cases.py, each planted
and its clean twin).  Run from the repository root:

    PYTHONPATH=$PWD python scripts/compile_blindness.py [--backend aot_eager|inductor] [--in-place] [CASE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from tests.guards import compiled_cases as cases  # noqa: E402


def _slugs(g) -> str:
    return ",".join(sorted({f.slug for f in g.report()})) or "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="aot_eager")
    ap.add_argument("--in-place", action="store_true", help="module.compile() instead of torch.compile(module)")
    ap.add_argument("cases", nargs="*", default=list(cases.CASES))
    args = ap.parse_args()
    wrap = cases.compiled_in_place(args.backend) if args.in_place else cases.compiled(args.backend)
    print(f"| check | eager planted | eager twin | compiled ({args.backend}{', in place' if args.in_place else ''}) "
          "planted | compiled twin | graphs compiled (planted, twin) |")
    print("|---|---|---|---|---|---|")
    for name in args.cases:
        fn = cases.CASES[name]
        row, graphs = [name], []
        for w in (cases.eager, wrap):
            for planted in (True, False):
                torch._dynamo.reset()
                torch._dynamo.utils.counters.clear()
                row.append(_slugs(fn(w, planted)))
                graphs.append(torch._dynamo.utils.counters["stats"].get("unique_graphs", 0))
        row.append(f"{graphs[2]}, {graphs[3]}")
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
