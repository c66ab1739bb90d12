"""Overhead of the runtime guards on a tiny MLP on CPU (where framework overhead dominates).

Two measurements, each guards-off vs guards-on, interleaved in rounds so that
machine noise hits both alike.  On a shared machine the OS preempts the
process for milliseconds at a time, which wrecks wall-clock means, so a
round's speed is measured two ways: steps per CPU-second of the process
(``time.process_time``: preemption does not count, checked steps do) and
1 / (median wall time of one step).  The figures are medians over rounds:

1. ``overt.guard(model, opt)`` in a hand-written loop, in one process (each
   guarded round first runs 500 steps: the first steps are all checked and the
   check interval adapts, so the figure is the steady state);
2. ``overt run`` on a hand-written script vs ``python script.py`` (the script
   times its own loop, so interpreter start-up is not counted).

Usage::

    python benchmarks/guard_overhead.py [--steps 3000] [--rounds 7] [--threads 1] [--skip-run]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SCRIPT = r'''
import sys, time, torch
import torch.nn.functional as F
from torch import nn
torch.set_num_threads(int(sys.argv[2]))
torch.manual_seed(0)
x = torch.rand(2048, 64); y = (x @ torch.randn(64, 10)).argmax(1)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
steps = int(sys.argv[1])
def run(n):
    times = []
    cpu = time.process_time()
    for i in range(n):
        t = time.perf_counter()
        j = (i * 32) % 2016
        opt.zero_grad()
        loss = F.cross_entropy(model(x[j:j + 32]), y[j:j + 32])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return times, time.process_time() - cpu
run(500)
times, cpu = run(steps)
times.sort()
print(f"STEPS_PER_S {steps / cpu:.1f} MEDIAN {1 / times[len(times) // 2]:.1f}")
'''


def in_process(steps: int, rounds: int, threads: int) -> tuple[float, float]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    import overt

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.rand(2048, 64)
    y = (x @ torch.randn(64, 10)).argmax(1)  # learnable labels

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(1)
        m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        return m, torch.optim.SGD(m.parameters(), lr=0.05)

    model, opt = fresh()

    def loop(n: int) -> tuple[float, float]:
        """(steps per CPU-second, 1 / median wall time of a step)."""
        times = []
        cpu = time.process_time()
        for i in range(n):
            t = time.perf_counter()
            j = (i * 32) % 2016
            opt.zero_grad()
            loss = F.cross_entropy(model(x[j:j + 32]), y[j:j + 32])
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t)
        return n / (time.process_time() - cpu), 1 / statistics.median(times)

    loop(300)
    off, on = [], []
    for _ in range(rounds):
        model, opt = fresh()
        off.append(loop(steps))
        model, opt = fresh()
        g = overt.guard(model, opt, stream=io.StringIO())
        loop(500)  # the first steps are all checked and the interval adapts: measure the steady state
        on.append(loop(steps))
        findings = g.report(quiet=True)
        assert not findings, [f.format() for f in findings]
    return summarize(off, on)


def summarize(off: list[tuple[float, float]], on: list[tuple[float, float]]) -> tuple[float, float, float, float]:
    """Median over rounds of (CPU-time speed off, on, median-step speed off, on), in steps/s."""
    return (statistics.median(o[0] for o in off), statistics.median(o[0] for o in on),
            statistics.median(o[1] for o in off), statistics.median(o[1] for o in on))


def under_overt_run(steps: int, rounds: int, threads: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "tiny_mlp.py"
        script.write_text(SCRIPT)

        def once(cmd: list[str]) -> tuple[float, float]:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
            fields = out.split("STEPS_PER_S")[1].split()
            return float(fields[0]), float(fields[2])  # per CPU-second, median step

        off, on = [], []
        for _ in range(rounds):
            off.append(once([sys.executable, str(script), str(steps), str(threads)]))
            on.append(once([sys.executable, "-m", "overt", "run", str(script), str(steps), str(threads)]))
    return summarize(off, on)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-run", action="store_true", help="skip the overt run measurement")
    args = ap.parse_args()
    import torch

    print(f"torch {torch.__version__}, {args.steps} steps x {args.rounds} rounds, {args.threads} thread(s), "
          f"tiny MLP 64-64-10, batch 32, SGD, CPU")
    report("overt.guard", in_process(args.steps, args.rounds, args.threads))
    if not args.skip_run:
        report("overt run", under_overt_run(args.steps, args.rounds, args.threads))


def report(name: str, figures: tuple[float, float, float, float]) -> None:
    off, on, med_off, med_on = figures
    cpu = 100 * (off - on) / off
    med = 100 * (med_off - med_on) / med_off
    print(f"{name:12s} per CPU-second: off {off:8.1f} on {on:8.1f} steps/s, overhead {cpu:+.1f}%   "
          f"median step: off {med_off:8.1f} on {med_on:8.1f} steps/s, overhead {med:+.1f}%")


if __name__ == "__main__":
    main()
