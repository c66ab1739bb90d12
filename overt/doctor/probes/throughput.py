"""Probe 10, throughput and data starvation: over N training steps, the time spent waiting for
the next batch vs computing; samples per second; peak memory; what to change when the loader
dominates."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

from overt.doctor.common import Clock, Forward, default_forward, fresh, precision_step, samples, to
from overt.doctor.result import ProbeResult, Verdict

TESTS = "time waiting for data vs computing over N training steps; samples/s; peak memory"

#: waiting share of the step time above which the probe warns, on an accelerator and on the CPU
WAIT_ACCELERATOR, WAIT_CPU = 0.2, 0.5


def peak_memory(device: torch.device) -> tuple[int, str]:
    """(bytes, what was measured): CUDA max allocated, else the process's peak resident set size."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "CUDA max allocated"
    try:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(rss if os.uname().sysname == "Darwin" else rss * 1024), "process peak RSS"
    except (ImportError, AttributeError):  # pragma: no cover - Windows
        return 0, "unavailable"


#: one thread faster than torch's default by this factor: the threads fight over too few free cores
OVERSUBSCRIBED = 1.5
THREAD_STEPS = 6


def oversubscribed(default_step_s: float, one_thread_step_s: float, threads: int) -> bool:
    """Whether one intra-op thread trains clearly faster than ``threads`` (torch's default)."""
    return threads > 1 and one_thread_step_s > 0 and default_step_s / one_thread_step_s >= OVERSUBSCRIBED


def _compare_threads(r: ProbeResult, model: nn.Module, optimizer: Any, loss_fn: Any, batches: list[Any],
                     forward: Any, prec: Any, default_step_s: float) -> None:
    """Time a few training steps of a fresh copy with one intra-op thread and compare with the
    default measured above; warn when one thread is much faster (threads oversubscribed: more
    threads than free cores, e.g. several processes each using every core, or a busy machine)."""
    import time

    threads = torch.get_num_threads()
    if threads <= 1 or len(batches) < 2:
        return
    m, opt, _ = fresh(model, optimizer)
    m.train()
    try:
        torch.set_num_threads(1)
        precision_step(m, opt, loss_fn, batches[0], forward, prec)  # warm-up
        t0 = time.perf_counter()
        for batch in batches[1:]:
            precision_step(m, opt, loss_fn, batch, forward, prec)
        one = (time.perf_counter() - t0) / (len(batches) - 1)
    finally:
        torch.set_num_threads(threads)
    r.evidence.update(intra_op_threads=threads, step_ms_one_thread=1e3 * one)
    r.lines.append(f"intra-op threads: {threads} (torch's default): {1e3 * default_step_s:.2f} ms per step of "
                   f"compute; with 1 thread: {1e3 * one:.2f} ms")
    if not oversubscribed(default_step_s, one, threads):
        return
    r.verdict = Verdict.WARN
    r.summary += f"; 1 thread is {default_step_s / one:.1f}x faster than {threads}"
    r.lines.append(f"warning: training ran {default_step_s / one:.1f}x faster with 1 thread than with {threads}: "
                   f"the threads are oversubscribed (more threads than free cores: other processes, loader workers "
                   f"or ranks each using every core). Fix: torch.set_num_threads(N) or OMP_NUM_THREADS=N with N "
                   f"at most the free cores (os.cpu_count() = {os.cpu_count()}) divided by the processes sharing them")


def throughput(model: nn.Module, optimizer: Any, loss_fn: Any, loader: Any, *, device: Any = "cpu",
               forward: Forward | None = None, precision: str = "fp32", steps: int = 50,
               time_limit_s: float = 5.0, num_workers: int | None = None, dataset_size: int | None = None
               ) -> ProbeResult:
    """Probe 10 on its own: up to ``steps`` training steps of a copy over ``loader`` (after 2 warm-up
    steps), timing ``next(batch)`` separately from move + forward + backward + step."""
    from overt.engine.precision import Precision

    r = ProbeResult("throughput", "Throughput and data starvation", TESTS)
    forward = forward or default_forward
    device = torch.device(device)
    m, opt, _ = fresh(model, optimizer)
    m.to(device).train()
    prec = Precision(precision, device)
    clock = Clock(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    wait = compute = 0.0
    n_samples = n_steps = 0
    warmup = 2
    it = iter(loader)
    t_start = clock.now()
    first_batch_s = None
    kept: list[Any] = []  # the first batches, timed again with one thread (on the CPU)
    fresh_epoch = True  # no batch since the loader was (re)started: an empty loader would loop forever
    while n_steps < steps + warmup:
        t0 = clock.now()
        try:
            batch = next(it)
        except StopIteration:
            if fresh_epoch:
                from overt.errors import ConfigError

                raise ConfigError("the training loader yields no batch",
                                  why="there is nothing to measure (and a training run would do nothing)",
                                  fix="check the training data set is not empty (and drop_last with fewer samples "
                                      "than one batch)") from None
            it, fresh_epoch = iter(loader), True
            continue
        fresh_epoch = False
        t1 = clock.now()
        if first_batch_s is None:
            first_batch_s = t1 - t0
        batch = to(batch, device)
        if len(kept) < THREAD_STEPS:
            kept.append(batch)
        precision_step(m, opt, loss_fn, batch, forward, prec)
        t2 = clock.now()
        n_steps += 1
        if n_steps > warmup:
            wait += t1 - t0
            compute += t2 - t1
            n_samples += samples(batch)
        if t2 - t_start > time_limit_s and n_steps > warmup + 3:
            break
    measured = n_steps - warmup
    total = wait + compute
    share = wait / total if total else 0.0
    rate = n_samples / total if total else 0.0
    mem, mem_kind = peak_memory(device)
    workers = num_workers if num_workers is not None else getattr(loader, "num_workers", 0)
    pinned = bool(getattr(loader, "pin_memory", False))
    r.evidence.update(steps=measured, samples_per_s=rate, wait_share=share, step_ms=1e3 * total / max(measured, 1),
                      wait_ms=1e3 * wait / max(measured, 1), first_batch_ms=1e3 * (first_batch_s or 0.0),
                      peak_memory_bytes=mem, peak_memory_kind=mem_kind, device=str(device), precision=prec.mode,
                      num_workers=workers, pin_memory=pinned, batch_size=getattr(loader, "batch_size", None),
                      cpu_count=os.cpu_count())
    if dataset_size:
        r.evidence["epoch_s"] = dataset_size / rate if rate else None
    r.lines.append(f"{measured} steps on {device} ({prec.mode}): {rate:,.0f} samples/s, "
                   f"{r.evidence['step_ms']:.2f} ms per step of which {r.evidence['wait_ms']:.2f} ms "
                   f"({share:.0%}) waiting for the next batch")
    r.lines.append(f"first batch of the epoch: {r.evidence['first_batch_ms']:.1f} ms (loader start-up); "
                   f"loader: num_workers={workers}, pin_memory={pinned}")
    r.lines.append(f"peak memory ({mem_kind}): {mem / 2**20:,.0f} MiB")
    if dataset_size and rate:
        r.lines.append(f"one epoch of {dataset_size:,} samples: about {dataset_size / rate:.1f} s of training")
    limit = WAIT_CPU if device.type == "cpu" else WAIT_ACCELERATOR
    r.summary = f"{rate:,.0f} samples/s, {share:.0%} of step time waiting for data, peak {mem / 2**20:,.0f} MiB"
    if device.type == "cpu" and compute > 0 and measured > 0:
        _compare_threads(r, model, optimizer, loss_fn, kept, forward, prec, compute / measured)
    if share <= limit:
        return r
    r.verdict = Verdict.WARN
    r.find("dataloader-starvation",
           f"{share:.0%} of each training step ({r.evidence['wait_ms']:.2f} of {r.evidence['step_ms']:.2f} ms) is "
           f"spent waiting for the next batch on {device}: the {'accelerator' if device.type != 'cpu' else 'model'} "
           f"idles while the loader works.", where=f"training loader (num_workers={workers})")
    advice = []
    cores = os.cpu_count() or 1
    if workers == 0 and cores > 1:
        advice.append(f"num_workers={min(4, cores)} (this machine has {cores} cores; the loader now runs in the "
                      f"training process)")
    if device.type == "cuda" and not pinned:
        advice.append("pin_memory=True (faster, asynchronous host-to-device copies)")
    advice.append("a larger batch size (fewer, larger batches amortise per-batch overhead)")
    advice.append("do per-sample work (decoding, augmentation) once ahead of time, or on the device")
    r.causes.append("too few loader workers, unpinned memory, or heavy per-sample work in __getitem__")
    r.fix = "; ".join(advice)
    return r
