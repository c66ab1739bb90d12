"""Measure what each wild case's bug does to its metric: the buggy script and its twin run with
plain ``python`` (no overt), each printing ``METRIC <value>`` last; the case records the numbers in
``METRIC = (name, bug, twin)``.

    python -m tests.wild.metrics              # every case that records a METRIC
    python -m tests.wild.metrics w27 w40      # some cases
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from tests.wild.harness import case_id, cases

_METRIC = re.compile(r"^METRIC (\S+)", re.M)


def measure(case: ModuleType, bug: bool, timeout: float = 300.0) -> float:
    """Run the case's script (``bug`` or its twin) as ``python train.py`` and return its METRIC."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "train.py"
        path.write_text(case.script(bug))
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout, cwd=d,
                             env=env)
    found = _METRIC.findall(out.stdout)
    if out.returncode != 0 or not found:
        raise RuntimeError(f"{case_id(case)} ({'bug' if bug else 'twin'}) printed no METRIC: {out.stderr[-800:]}")
    return float(found[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.wild.metrics")
    ap.add_argument("cases", nargs="*", help="case id prefixes (default: every case with a METRIC)")
    args = ap.parse_args(argv)
    chosen = [c for c in cases() if hasattr(c, "METRIC")
              and (not args.cases or any(case_id(c).startswith(p) for p in args.cases))]
    print(f"{'case':38s} {'metric':22s} {'bug':>8s} {'twin':>8s}   recorded (bug, twin)")
    for case in chosen:
        t0 = time.perf_counter()
        name, rec_bug, rec_twin = case.METRIC
        bug, twin = measure(case, True), measure(case, False)
        print(f"{case_id(case):38s} {name:22s} {bug:8.4f} {twin:8.4f}   ({rec_bug}, {rec_twin})"
              f"  {time.perf_counter() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
