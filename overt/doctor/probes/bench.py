"""Probe 12 (opt-in, ``--bench``): device benchmark.  Matrix multiplications at several sizes and
one training step at several batch sizes, on the CPU and (when present) the accelerator, timed
with the device synchronised around the measurement."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import nn

from overt.config import TrainConfig
from overt.doctor.common import Clock, Forward, default_forward, samples
from overt.doctor.probes.parity import accelerator
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult
from overt.doctor.shortrun import Objects, fixed_batches, kept_rng, trainer_for
from overt.engine.callbacks import Callback

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


class _StepTimes(Callback):
    """Seconds of each optimizer step (device synchronised); stops after 2 warm-up steps and
    ``repeat`` timed ones, or once ``budget_s`` is spent on the timed ones."""

    def __init__(self, clock: Clock, repeat: int, budget_s: float = 1.0):
        self.clock, self.repeat, self.budget_s = clock, repeat, budget_s
        self.times: list[float] = []
        self._mark = self._timed_from = 0.0

    def on_epoch_start(self, trainer: Any, epoch: int) -> None:
        self._mark = self.clock.now()

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        now = self.clock.now()
        self.times.append(now - self._mark)
        self._mark = now
        if len(self.times) == 2:
            self._timed_from = now
        if len(self.times) >= 2 + self.repeat or (len(self.times) > 2 and now - self._timed_from > self.budget_s):
            trainer.should_stop = True

    def median(self) -> float:
        timed = sorted(self.times[2:] or self.times)
        return timed[len(timed) // 2]


def _step_seconds(objs: Objects, batch: Any, device: str, repeat: int) -> float:
    """Median seconds per optimizer step of overt's Trainer on a copy, ``batch`` as every micro-batch."""
    cfg = objs.config.model_copy(update={"device": device})
    timer = _StepTimes(Clock(torch.device(device)), repeat)
    with kept_rng():
        trainer, _ = trainer_for(Objects(objs.model, objs.optimizer, objs.loss_fn, None, forward=objs.forward,
                                         config=cfg), 2 + repeat, data=fixed_batches(batch, 2 + repeat, cfg),
                                 callbacks=[timer], scheduler=False, epochs=1)
        trainer.fit()
    return timer.median()


def device_bench(model: nn.Module, optimizer: Any, loss_fn: Any, batch: Any, *, forward: Forward | None = None,
                 sizes: tuple[int, ...] = (256, 1024, 2048), batch_factors: tuple[int, ...] = (1, 4),
                 devices: list[str] | None = None, config: TrainConfig | None = None) -> ProbeResult:
    """Probe 12 on its own: GFLOP/s of ``n x n`` matmuls and ms per optimizer step of overt's Trainer
    on a copy at ``batch_factors`` x the batch's size (the batch repeated; ``config``'s precision,
    accumulation and clipping), on each of ``devices``."""
    r = ProbeResult("bench", "Device benchmark", TESTS)
    forward = forward or default_forward
    devices = devices or ["cpu"] + ([accelerator()] if accelerator() else [])
    table: dict[str, dict[str, float]] = {}
    base = samples(batch)
    cfg = config if config is not None else TrainConfig()
    for name in devices:
        device = torch.device(name)
        clock = Clock(device)
        row: dict[str, float] = {}
        for n in sizes:
            a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
            seconds = _time(lambda: a @ b, clock, 10)
            row[f"matmul {n}"] = 2 * n**3 / seconds / 1e9
        objs = Objects(model, optimizer, loss_fn, None, forward=forward, config=cfg)
        for k in batch_factors:
            row[f"step batch {base * k * cfg.accumulate}"] = 1e3 * _step_seconds(objs, _repeat(batch, k), name, 20)
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


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return device_bench(setup.model, setup.optimizer, setup.loss_fn, setup.batches(1)[0], forward=setup.forward,
                        config=setup.cfg)


PROBE = Probe("bench", "Device benchmark", 120, _run, needs=("loss",), opt_in="bench",
              settings={"bench": False})
