"""Probe 10, throughput and data starvation: over N training steps, the time spent waiting for
the next batch vs computing; samples per second; peak memory; what to change when the loader
dominates."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

from overt.config import TrainConfig
from overt.doctor.common import Clock, Forward, default_forward, samples
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.doctor.shortrun import (Batches, Objects, as_configured, as_loader, epochs_for, kept_rng, probe_config,
                                   trained_as, trainer_for)
from overt.engine.callbacks import Callback
from overt.engine.device import pick_device

TITLE = "Throughput and data starvation"
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


def _compare_threads(r: ProbeResult, objs: Objects, batches: list[Any], default_step_s: float) -> None:
    """Time a few training steps of a fresh copy with one intra-op thread and compare with the
    default measured above; warn when one thread is much faster (threads oversubscribed: more
    threads than free cores, e.g. several processes each using every core, or a busy machine)."""
    threads = torch.get_num_threads()
    steps = len(batches) // objs.config.accumulate
    if threads <= 1 or steps < 2:
        return
    timer = StepTimer(torch.device("cpu"), steps=steps - 1, warmup=1, time_limit_s=float("inf"))
    try:
        torch.set_num_threads(1)
        with kept_rng():
            trainer, _ = trainer_for(objs, steps, data=Batches(batches), callbacks=[timer], scheduler=False,
                                     epochs=1)
            trainer.fit()
        one = timer.compute / max(timer.measured, 1)
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


class StepTimer(Callback):
    """Per optimizer step: time waiting for the loader's next batch vs everything else (move,
    forward, backward, step), with the device synchronised at each mark; stops the run after
    ``warmup + steps`` steps, or once ``time_limit_s`` is spent and a few steps are measured."""

    def __init__(self, device: torch.device, *, steps: int, warmup: int, time_limit_s: float, keep: int = 0):
        self.clock, self.steps, self.warmup, self.time_limit_s = Clock(device), steps, warmup, time_limit_s
        self.keep = keep
        self.wait = self.compute = 0.0
        self.samples = self.done = 0
        self.first_batch_s: float | None = None
        self.kept: list[Any] = []  # the first micro-batches, timed again with one thread (on the CPU)
        self._wait = self._compute = 0.0
        self._samples = self._epoch_batches = 0
        self._mark = self._start = 0.0

    @property
    def measured(self) -> int:
        return max(self.done - self.warmup, 0)

    def on_fit_start(self, trainer: Any) -> None:
        self._start = self.clock.now()

    def on_epoch_start(self, trainer: Any, epoch: int) -> None:
        self._mark, self._epoch_batches = self.clock.now(), 0  # the loader's start-up is waiting too

    def on_batch_start(self, trainer: Any, batch: Any, batch_index: int) -> None:
        now = self.clock.now()
        if self.first_batch_s is None:
            self.first_batch_s = now - self._mark
        self._wait += now - self._mark
        self._mark = now
        self._samples += samples(batch)
        self._epoch_batches += 1
        if len(self.kept) < self.keep:
            self.kept.append(batch)

    def on_after_backward(self, trainer: Any, loss: Any) -> None:
        now = self.clock.now()
        self._compute += now - self._mark
        self._mark = now

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        now = self.clock.now()
        self._compute += now - self._mark
        self._mark = now
        self.done += 1
        if self.done > self.warmup:
            self.wait, self.compute, self.samples = (self.wait + self._wait, self.compute + self._compute,
                                                     self.samples + self._samples)
        self._wait = self._compute = 0.0
        self._samples = 0
        if self.done >= self.steps + self.warmup or (now - self._start > self.time_limit_s
                                                     and self.done > self.warmup + 3):
            trainer.should_stop = True

    def on_epoch_end(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> None:
        if self._epoch_batches == 0:  # an exhausted iterable: every further epoch would be empty too
            from overt.errors import ConfigError

            raise ConfigError("the training loader yields no batch",
                              why="there is nothing to measure (and a training run would do nothing)",
                              fix="check the training data set is not empty (and drop_last with fewer samples "
                                  "than one batch)")


def throughput(model: nn.Module, optimizer: Any, loss_fn: Any, loader: Any = None, *, dataset: Any = None,
               device: Any = None,
               forward: Forward | None = None, precision: str | None = None, steps: int = 50,
               time_limit_s: float = 5.0, num_workers: int | None = None, dataset_size: int | None = None,
               config: TrainConfig | None = None, collate_fn: Any = None) -> ProbeResult:
    """Probe 10 on its own: up to ``steps`` optimizer steps of overt's Trainer on a copy (after 2
    warm-up steps), timing the wait for each batch separately from move + forward + backward + step.
    ``loader`` is a DataLoader or a list of batches; or give ``dataset`` (a Dataset: the Trainer
    builds its loader from ``config``, batch size, workers, pinned memory, as for the real run).
    ``config`` gives the precision (overridden by ``precision``), accumulation and clipping."""
    r = ProbeResult("throughput", TITLE, TESTS)
    forward = forward or default_forward
    cfg = probe_config(config, model, device)
    if precision is not None:
        cfg = cfg.model_copy(update={"precision": precision})
    device = pick_device(cfg.device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    warmup = 2
    data = dataset if dataset is not None else as_loader(loader)
    timer = StepTimer(device, steps=steps, warmup=warmup, time_limit_s=time_limit_s,
                      keep=THREAD_STEPS * cfg.accumulate if device.type == "cpu" else 0)
    objs = Objects(model, optimizer, loss_fn, data, forward=forward, collate_fn=collate_fn, config=cfg)
    with kept_rng():
        trainer, _ = trainer_for(objs, steps + warmup, callbacks=[timer], scheduler=False,
                                 epochs=epochs_for(data, steps + warmup, cfg))
        trainer.fit()
    prec, loader = trainer.precision, trainer.train_loader
    wait, compute, n_samples, first_batch_s = timer.wait, timer.compute, timer.samples, timer.first_batch_s
    measured = timer.measured
    total = wait + compute
    share = wait / total if total else 0.0
    rate = n_samples / total if total else 0.0
    mem, mem_kind = peak_memory(device)
    workers = num_workers if num_workers is not None else getattr(loader, "num_workers", 0)
    pinned = bool(getattr(loader, "pin_memory", False))
    r.evidence.update(steps=measured, samples_per_s=rate, wait_share=share, step_ms=1e3 * total / max(measured, 1),
                      wait_ms=1e3 * wait / max(measured, 1), first_batch_ms=1e3 * (first_batch_s or 0.0),
                      peak_memory_bytes=mem, peak_memory_kind=mem_kind, device=str(device),
                      num_workers=workers, pin_memory=pinned, batch_size=getattr(loader, "batch_size", None),
                      cpu_count=os.cpu_count(), **trained_as(trainer))
    if dataset_size:
        r.evidence["epoch_s"] = dataset_size / rate if rate else None
    r.lines.append(f"{measured} steps on {device} ({prec.mode}): {rate:,.0f} samples/s, "
                   f"{r.evidence['step_ms']:.2f} ms per step of which {r.evidence['wait_ms']:.2f} ms "
                   f"({share:.0%}) waiting for the next batch")
    r.lines.append(f"first batch of the epoch: {r.evidence['first_batch_ms']:.1f} ms (loader start-up); "
                   f"loader: num_workers={workers}, pin_memory={pinned}")
    r.lines.append(f"peak memory ({mem_kind}): {mem / 2**20:,.0f} MiB")
    if as_configured(trainer):
        r.lines.append(as_configured(trainer))
    if dataset_size and rate:
        r.lines.append(f"one epoch of {dataset_size:,} samples: about {dataset_size / rate:.1f} s of training")
    limit = WAIT_CPU if device.type == "cpu" else WAIT_ACCELERATOR
    r.summary = f"{rate:,.0f} samples/s, {share:.0%} of step time waiting for data, peak {mem / 2**20:,.0f} MiB"
    if device.type == "cpu" and compute > 0 and measured > 0:
        _compare_threads(r, Objects(model, optimizer, loss_fn, None, forward=forward, config=cfg), timer.kept,
                         compute / measured)
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


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    data = setup.train_data
    size = len(data) if hasattr(data, "__len__") and hasattr(data, "__getitem__") else None
    return throughput(setup.model, setup.optimizer, setup.loss_fn, dataset=data, device=setup.device,
                      forward=setup.forward,
                      steps=setup.setting("throughput_steps"), time_limit_s=setup.setting("throughput_time_s"),
                      dataset_size=size, config=setup.cfg, collate_fn=setup.collate_fn)


def _risks(readiness: Any, t: ProbeResult) -> list[tuple[int, str]]:
    from overt.doctor.result import duration, number

    e = t.evidence
    if t.verdict is Verdict.SKIPPED or not e.get("samples_per_s"):
        return []
    risks = []
    rate = e["samples_per_s"]
    n = readiness.setup.get("train_samples") or 0
    if n:
        per_epoch = n / rate
        risks.append((10, f"Throughput: {rate:,.0f} samples/s on {e['device']} makes an epoch of this data "
                          f"{duration(per_epoch)}; a 100x larger data set ({number(100 * n)} samples) takes "
                          f"{duration(100 * per_epoch)} per epoch at this rate."))
    if e.get("wait_share", 0) > 0.2:
        risks.append((10, f"Data loading already takes {e['wait_share']:.0%} of each step with "
                          f"{e.get('num_workers')} worker(s); with a bigger data set or heavier per-sample work the "
                          f"device will wait more. {t.fix or ''}".strip()))
    mem = e.get("peak_memory_bytes", 0)
    if mem:
        risks.append((10, f"Memory: peak {mem / 2**20:,.0f} MiB ({e.get('peak_memory_kind')}) at batch size "
                          f"{e.get('batch_size')}; activation memory grows with the batch size and the model, so "
                          f"measure again before raising either."))
    return risks


PROBE = Probe("throughput", TITLE, 100, _run, needs=("forward", "loss"), risks=_risks,
              settings={"throughput_steps": 50, "throughput_time_s": 5.0})
