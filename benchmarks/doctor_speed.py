"""Time of ``overt doctor`` on the built-in digits recipe: probes 1-10 (no LR sweep, no device
benchmark), with the default doctor settings.

    python benchmarks/doctor_speed.py [--repeats 3]

Two timings, each the median of ``--repeats`` runs:

- command line: ``python -m overt doctor digits out=TMP`` wall time, interpreter start, imports,
  recipe build, every probe and writing the note and plots included;
- CPU time (user + system) of that command: what it costs when the machine is shared;
- per probe: the seconds each probe took (from ``readiness.json``), median over the runs.

Target (issue 8): the whole command in 20 s or less on the 2-core CPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    walls: list[float] = []
    cpus: list[float] = []
    per_probe: dict[str, list[float]] = {}
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "doctor"
            start = time.perf_counter()
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            proc = subprocess.run([sys.executable, "-m", "overt", "doctor", "digits", f"out={out}", "--quiet"],
                                  env=env, capture_output=True, text=True, cwd=REPO)
            walls.append(time.perf_counter() - start)
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            report = json.loads((out / "readiness.json").read_text())
            for probe in report["probes"]:
                per_probe.setdefault(probe["title"], []).append(probe["seconds"])
    wall = statistics.median(walls)
    probes_total = sum(statistics.median(v) for v in per_probe.values())
    print(f"overt doctor digits (probes 1-10), median of {args.repeats}: {wall:.2f} s wall "
          f"(runs: {', '.join(f'{w:.2f}' for w in walls)}); target <= 20 s: {'met' if wall <= 20 else 'MISSED'}")
    print(f"  CPU time of the command (user + system, independent of other load): {statistics.median(cpus):.2f} s")
    print(f"  probes: {probes_total:.2f} s; start-up, imports, build and writing the note: {wall - probes_total:.2f} s")
    for title, values in per_probe.items():
        print(f"  {title:<40} {statistics.median(values):6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
