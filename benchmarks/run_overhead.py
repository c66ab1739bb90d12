"""What does ``overt run`` cost?  Start-up and per-step time vs the plain script, as ratios.

Four scripts, each run plainly (``python script.py``) and under ``overt run``,
interleaved (plain, overt, plain, overt, ...) so that a machine whose load changes
affects both alike; medians of ``--repeat`` runs:

- ``startup``: an empty training script (imports torch and builds a model): the
  whole process's wall time, i.e. what ``overt run`` adds before the first step;
- ``tiny``: thousands of tiny steps without an optimizer (a polynomial fitted by
  hand, as pytorch/examples' regression/main.py does);
- ``small``: an MLP (64-128-10) with SGD on batches of 32;
- ``mid``: an MLP (512-1024-1024-10) with Adam on batches of 128.

For the training scripts the loop times itself (``perf_counter`` around the steps),
so "per step" excludes start-up; "whole run" is the process's.  Each ratio is given on
wall time and, in brackets, on CPU time (user + system), which a busy machine disturbs less.  A ratio is
overt / plain: 1.00 means no cost::

    python benchmarks/run_overhead.py              # OMP_NUM_THREADS=1 is set for both
    python benchmarks/run_overhead.py --repeat 7 --steps-scale 2
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

EMPTY = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
"""

TINY = """
import sys, time
import torch
import torch.nn.functional as F
torch.manual_seed(0)
W, b = torch.randn(4, 1) * 5, torch.randn(1) * 5
fc = torch.nn.Linear(4, 1)
def batch():
    x = torch.randn(32).unsqueeze(1)
    x = torch.cat([x ** i for i in range(1, 5)], 1)
    return x, x.mm(W) + b.item()
steps = int(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
for i in range(steps):
    x, y = batch()
    fc.zero_grad()
    loss = F.smooth_l1_loss(fc(x), y)
    loss.item()
    loss.backward()
    for p in fc.parameters():
        p.data.add_(-0.1 * p.grad)
print("LOOP", time.perf_counter() - t0, time.process_time() - c0)
"""

MLP = """
import sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
sizes = [int(s) for s in sys.argv[2].split("-")]
layers = []
for a, b in zip(sizes, sizes[1:]):
    layers += [nn.Linear(a, b), nn.ReLU()]
model = nn.Sequential(*layers[:-1])
batch = int(sys.argv[3])
x = torch.randn(batch * 16, sizes[0])
y = torch.randint(0, sizes[-1], (batch * 16,))
loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True)
opt = (torch.optim.SGD(model.parameters(), lr=0.01) if sys.argv[4] == "sgd"
       else torch.optim.Adam(model.parameters(), lr=1e-3))
loss_fn = nn.CrossEntropyLoss()
steps = int(sys.argv[1])
done = 0
t0, c0 = time.perf_counter(), time.process_time()
while done < steps:
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        done += 1
        if done == steps:
            break
print("LOOP", time.perf_counter() - t0, time.process_time() - c0)
"""

# name -> (script, argv after the step count, steps)
CASES = {
    "tiny": (TINY, [], 4000),
    "small": (MLP, ["64-128-10", "32", "sgd"], 2000),
    "mid": (MLP, ["512-1024-1024-10", "128", "adam"], 60),
}


def _run(argv: list[str], cwd: str) -> dict[str, float]:
    """One process: its wall and CPU time, and its loop's (when it prints ``LOOP wall cpu``)."""
    env = {**os.environ, "PYTHONPATH": os.environ.get("OVERT_BENCH_PATH", str(REPO)), "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    out = {"wall": wall, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}
    for line in proc.stdout.splitlines():
        if line.startswith("LOOP "):
            out["loop_wall"], out["loop_cpu"] = (float(v) for v in line.split()[1:3])
    return out


def measure(script: str, argv: list[str], repeat: int, cwd: str) -> dict[str, dict[str, float]]:
    """Medians per mode ("plain", "overt") of each time, the runs interleaved."""
    path = Path(cwd) / "script.py"
    path.write_text(script)
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "overt": []}
    for _ in range(repeat):
        for mode, prefix in (("plain", []), ("overt", ["-m", "overt", "run"])):
            runs[mode].append(_run([*prefix, str(path), *argv], cwd))
    return {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for mode, rs in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved runs of each (median reported)")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply every case's step count")
    parser.add_argument("--only", nargs="*", default=None, help="startup and/or case names")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; median of {args.repeat} interleaved runs; OMP_NUM_THREADS=1; "
          f"ratios are overt run / plain (wall; CPU in brackets: steadier on a loaded machine)")
    with tempfile.TemporaryDirectory(prefix="overt-run-bench-") as tmp:
        if args.only is None or "startup" in args.only:
            t = measure(EMPTY, [], args.repeat, tmp)
            p, o = t["plain"], t["overt"]
            print(f"{'startup':<8} empty script: plain {p['wall']:.3f} s  overt run {o['wall']:.3f} s  "
                  f"ratio {o['wall'] / p['wall']:.2f}x [{o['cpu'] / p['cpu']:.2f}x]  "
                  f"(+{(o['wall'] - p['wall']) * 1000:.0f} ms wall, +{(o['cpu'] - p['cpu']) * 1000:.0f} ms CPU)")
        for name, (script, extra, steps) in CASES.items():
            if args.only is not None and name not in args.only:
                continue
            steps = max(1, int(steps * args.steps_scale))
            t = measure(script, [str(steps), *extra], args.repeat, tmp)
            p, o = t["plain"], t["overt"]
            print(f"{name:<8} {steps} steps: per step plain {p['loop_wall'] / steps * 1e6:.0f} us  overt run "
                  f"{o['loop_wall'] / steps * 1e6:.0f} us  ratio {o['loop_wall'] / p['loop_wall']:.2f}x "
                  f"[{o['loop_cpu'] / p['loop_cpu']:.2f}x];  whole run plain {p['wall']:.2f} s  overt run "
                  f"{o['wall']:.2f} s  ratio {o['wall'] / p['wall']:.2f}x [{o['cpu'] / p['cpu']:.2f}x]")

if __name__ == "__main__":
    main()
