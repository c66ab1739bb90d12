"""How light is `import overt`?  Median wall time of a fresh interpreter that imports
overt, minus one that imports nothing, and which heavy modules got imported.

    python benchmarks/import_time.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "rich", "tensorboard", "sklearn", "safetensors", "pydantic", "yaml", "mlflow", "matplotlib")


def run(code: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    base = run("pass", args.repeats)
    light = run("import overt", args.repeats)
    torch_only = run("import torch", max(3, args.repeats // 3))
    code = f"import sys, overt; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True).stdout.strip()
    print(f"python startup          {base * 1000:7.1f} ms")
    print(f"import overt (extra)    {(light - base) * 1000:7.1f} ms   heavy modules loaded: {loaded or 'none'}")
    print(f"import torch (extra)    {(torch_only - base) * 1000:7.1f} ms   (for scale)")


if __name__ == "__main__":
    main()
