"""Overhead of the runtime guards on a tiny MLP on CPU (where framework overhead dominates).

Three measurements, each guards-off vs guards-on in one process (or, for ``overt
run``, one process per run), interleaved in rounds so that machine noise hits
both alike:

1. the engine: ``overt.Trainer`` with its default guards on vs ``guards=False``
   (tiny MLP 64-32-10 on the digits training split, batch 64, AdamW, the
   engine's DataLoader over a TensorDataset, 23 steps per epoch).  Each round
   times one whole ``fit()`` of each; the figures are the minimum (the loop's
   intrinsic cost: the VM preempts the process for milliseconds at a time) and
   the median over rounds of the time per step.  Runs of ``--engine-epochs``
   (short: the guards' fixed cost -- session set-up and the warm-up's checked
   steps -- weighs most) and of 8x as many epochs (close to the steady state);
2. ``overt.guard(model, opt)`` in a hand-written loop (each guarded round first
   runs 500 steps: the first steps are all checked and the check interval
   adapts, so the figure is the steady state); a round's speed is measured as
   steps per CPU-second of the process (``time.process_time``: preemption does
   not count, checked steps do) and 1 / (median wall time of one step);
3. ``overt run`` on a hand-written script vs ``python script.py`` (the script
   times its own loop, so interpreter start-up is not counted).

Usage::

    python benchmarks/guard_overhead.py [--steps 3000] [--rounds 7] [--threads 1]
        [--engine-epochs 5] [--engine-rounds 30] [--skip-run] [--only-engine]
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


def engine(epochs: int, rounds: int, threads: int) -> tuple[list[float], list[float], int]:
    """Seconds per step of whole ``Trainer.fit()`` runs, guards off and on, alternating."""
    import torch
    from torch import nn

    import overt
    from overt.recipes.digits import load_digits_split

    torch.set_num_threads(threads)
    data, _ = load_digits_split(0.2, 0)

    def fit(guards: bool) -> tuple[float, int]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        trainer = overt.Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=epochs, batch_size=64,
                                device="cpu", progress="off", guards=guards)
        start = time.perf_counter()
        summary = trainer.fit()
        seconds = time.perf_counter() - start
        assert not summary.get("findings"), summary.get("findings")
        return seconds, summary["steps"]

    fit(False), fit(True)  # warm-up
    off, on = [], []
    steps = 0
    for _ in range(rounds):
        for guards, out in ((False, off), (True, on)):
            seconds, steps = fit(guards)
            out.append(seconds / steps)
    return off, on, steps


def report_engine(epochs: int, figures: tuple[list[float], list[float], int]) -> None:
    off, on, steps = figures
    lo_off, lo_on = min(off), min(on)
    med_off, med_on = statistics.median(off), statistics.median(on)
    print(f"engine, {epochs:3d} epochs ({steps:4d} steps): min step off {lo_off * 1e6:6.1f} us on "
          f"{lo_on * 1e6:6.1f} us, overhead {100 * (lo_on - lo_off) / lo_off:+.1f}%   "
          f"median step off {med_off * 1e6:6.1f} us on "
          f"{med_on * 1e6:6.1f} us, overhead {100 * (med_on - med_off) / med_off:+.1f}%")


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
    ap.add_argument("--engine-epochs", type=int, default=5)
    ap.add_argument("--engine-rounds", type=int, default=30)
    ap.add_argument("--skip-run", action="store_true", help="skip the overt run measurement")
    ap.add_argument("--only-engine", action="store_true", help="only the engine measurement")
    args = ap.parse_args()
    import torch

    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU")
    print(f"engine: Trainer, tiny MLP 64-32-10, digits, batch 64, AdamW, {args.engine_rounds} rounds "
          f"(fewer for the long runs)")
    report_engine(args.engine_epochs, engine(args.engine_epochs, args.engine_rounds, args.threads))
    long_epochs = 8 * args.engine_epochs
    report_engine(long_epochs, engine(long_epochs, max(5, args.engine_rounds // 4), args.threads))
    if args.only_engine:
        return
    print(f"hand loop: {args.steps} steps x {args.rounds} rounds, tiny MLP 64-64-10, batch 32, SGD")
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
