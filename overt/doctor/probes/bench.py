"""Probe 12 (opt-in, ``--bench``): device benchmark.  Matrix multiplications at several sizes and
one training step at several batch sizes, on the CPU and (when present) the accelerator, timed
with the device synchronised around the measurement."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import nn

from overt.doctor.common import Clock, Forward, default_forward, fresh, samples, to
from overt.doctor.probes.parity import accelerator
from overt.doctor.result import ProbeResult

TESTS = "matmul and one training step timed on the CPU and the accelerator, at several sizes"


def _time(fn: Any, clock: Clock, repeat: int, budget_s: float = 1.0) -> float:
    """Median seconds per call after two warm-up calls (fewer repeats when a call is slow)."""
    fn()
    fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t0 = clock.now()
        fn()
        times.append(clock.now() - t0)
        if time.perf_counter() - start > budget_s:
            break
    times.sort()
    return times[len(times) // 2]


def device_bench(model: nn.Module, optimizer: Any, loss_fn: Any, batch: Any, *, forward: Forward | None = None,
                 sizes: tuple[int, ...] = (256, 1024, 2048), batch_factors: tuple[int, ...] = (1, 4),
                 devices: list[str] | None = None) -> ProbeResult:
    """Probe 12 on its own: GFLOP/s of ``n x n`` matmuls and ms per training step of a copy at
    ``batch_factors`` x the batch's size (the batch repeated), on each of ``devices``."""
    r = ProbeResult("bench", "Device benchmark", TESTS)
    forward = forward or default_forward
    devices = devices or ["cpu"] + ([accelerator()] if accelerator() else [])
    table: dict[str, dict[str, float]] = {}
    base = samples(batch)
    for name in devices:
        device = torch.device(name)
        clock = Clock(device)
        row: dict[str, float] = {}
        for n in sizes:
            a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
            seconds = _time(lambda: a @ b, clock, 10)
            row[f"matmul {n}"] = 2 * n**3 / seconds / 1e9
        m, opt, _ = fresh(model, optimizer)
        m.to(device).train()
        for k in batch_factors:
            big = to(_repeat(batch, k), device)

            def step() -> None:
                opt.zero_grad(set_to_none=True)
                output, target = forward(m, big)
                loss_fn(output, target).backward()
                opt.step()

            row[f"step batch {base * k}"] = 1e3 * _time(step, clock, 20)
        table[name] = row
    r.evidence["table"] = table
    for name, row in table.items():
        mm = ", ".join(f"{k.split()[1]}: {v:,.0f} GFLOP/s" for k, v in row.items() if k.startswith("matmul"))
        st = ", ".join(f"batch {k.split()[-1]}: {v:.2f} ms" for k, v in row.items() if k.startswith("step"))
        r.lines.append(f"{name}: matmul {mm}; training step {st}")
    if len(table) > 1:
        cpu, acc = table[devices[0]], table[devices[1]]
        speedups = {k: cpu[k] / acc[k] if k.startswith("step") else acc[k] / cpu[k] for k in cpu}
        r.evidence["speedup"] = speedups
        r.lines.append("speed-up of the accelerator: " + ", ".join(f"{k} x{v:.1f}" for k, v in speedups.items()))
        steps = [k for k in speedups if k.startswith("step")]
        small, large = speedups[steps[0]], speedups[steps[-1]]
        r.summary = (f"training step x{small:.1f} faster on {devices[1]} at {steps[0].split()[-1]}, "
                     f"x{large:.1f} at {steps[-1].split()[-1]}")
        if large > 1.5 * small:
            r.lines.append(f"the accelerator gains more with larger batches (x{small:.1f} -> x{large:.1f}): a batch "
                           f"of {steps[-1].split()[-1]} or more uses it better, memory permitting")
        elif small < 1.5:
            r.lines.append("this model is too small to keep the accelerator busy: the CPU is about as fast")
    else:
        per_sample = [(k, v / int(k.split()[-1])) for k, v in table[devices[0]].items() if k.startswith("step")]
        best = min(per_sample, key=lambda kv: kv[1])
        r.summary = (f"cpu only: {table[devices[0]].get(f'matmul {sizes[-1]}', math.nan):,.0f} GFLOP/s at "
                     f"{sizes[-1]}; fastest per sample at {best[0].replace('step ', '')}")
        r.lines.append("no accelerator present: CPU figures only")
    return r


def _repeat(batch: Any, k: int) -> Any:
    if k == 1:
        return batch
    if isinstance(batch, torch.Tensor):
        return batch.repeat(k, *([1] * (batch.dim() - 1))) if batch.dim() else batch
    if isinstance(batch, (list, tuple)) and not hasattr(batch, "_fields"):
        return type(batch)(_repeat(b, k) for b in batch)
    if isinstance(batch, dict):
        return {key: _repeat(v, k) for key, v in batch.items()}
    return batch
