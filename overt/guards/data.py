"""Guards on the data pipeline (slugs ``dataloader-starvation``, ``too-many-workers``) and the batch index.

:mod:`overt.guards.patches` times every ``next()`` on a DataLoader iterator.
At checked steps the guard compares the time spent waiting for batches with
the wall time since the last check (the first batch of each pass, which
includes starting the worker processes, is left out).

A busy machine makes every part of the loop slower, the loader included: a cheap loader
in front of a tiny model can then cross the line because the process waits for a CPU
inside ``next()``.  So where Linux tells how long the thread waited for a CPU during the
window (``/proc/thread-self/schedstat``, read twice per window), that time is left out of
both the wait and the wall time before judging; a loop that starves only with it counted
gets an info line about the busy machine, not a finding.  A loader that sleeps, reads
files or waits for its workers is still reported: none of that is time spent waiting for
a CPU.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from overt.engine.busy import available_cpus, run_queue_wait
from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo
    from overt.guards.session import GuardSession

_MIN_BATCHES = 20
_FRACTION = 0.5
_MIN_WAIT_S = 0.002


class DataChecks(Check):
    """The DataLoader wrapper of :mod:`overt.guards.patches` fills the counters on every
    batch after the first of a pass; :meth:`evaluate` judges them at checked steps."""

    name = "data"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.wait = 0.0  # seconds spent waiting for batches since the last evaluation
        self.batches = 0  # batches counted in ``wait``
        self.start = time.perf_counter()  # when the first of them was asked for
        self.workers = 0  # the DataLoader's num_workers
        self.cpus = available_cpus()
        self.cpu_wait0: tuple[int, float] | None = None  # (thread, its run-queue wait) when the window began

    def mark_cpu_wait(self) -> None:
        """The next batch opens the window: note how long this thread has waited for a CPU."""
        w = run_queue_wait()
        self.cpu_wait0 = (threading.get_ident(), w) if w is not None else None

    def _cpu_wait(self) -> float:
        """Seconds this thread waited for a CPU since :meth:`mark_cpu_wait` (0 when unknown)."""
        w0, w = self.cpu_wait0, None
        if w0 is not None and w0[0] == threading.get_ident():
            w = run_queue_wait()
        return max(w - w0[1], 0.0) if w is not None and w0 is not None else 0.0

    def loader_started(self, workers: int) -> None:
        """A DataLoader pass begins with ``workers`` worker processes (too-many-workers)."""
        if workers <= 1 or workers <= self.cpus:
            return
        self.s.report(
            "too-many-workers",
            f"a DataLoader runs num_workers={workers} worker processes, but this process may use only "
            f"{self.cpus} CPU(s): the workers compete for the same cores with each other and with training, "
            "and each holds its own copy of the dataset (memory grows per worker).",
            fix=f"num_workers={max(self.cpus - 1, 1)} (at most the CPUs available, one left for the training process).",
            where=f"DataLoader, step {self.s.run_step(self.s.step)}", key="workers",
        )

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self.evaluate()

    def end_of_run(self) -> None:
        self.evaluate()

    def evaluate(self) -> None:
        if self.batches < _MIN_BATCHES:
            return
        wall = time.perf_counter() - self.start
        if self._starved(self.wait, wall):
            cpu_wait = self._cpu_wait()
            if cpu_wait and not self._starved(max(self.wait - cpu_wait, 0.0), wall - cpu_wait):
                self._busy(wall, cpu_wait)
            else:
                frac, mean = self.wait / wall, self.wait / self.batches
                self.s.report(
                    "dataloader-starvation",
                    f"the loop spent {frac:.0%} of its time waiting for the next batch ({mean * 1000:.1f} ms "
                    f"per batch over {self.batches} batches, num_workers={self.workers}): the model waits "
                    "for data.",
                    fix="DataLoader(num_workers=N, pin_memory=True, persistent_workers=True), "
                    "and move heavy work out of __getitem__ (pre-decode, cache, or batch transforms).",
                    where=f"DataLoader, {self.batches} batches before step {self.s.run_step(self.s.step)}",
                    key="loader",
                )
        self.wait = 0.0
        self.batches = 0

    def _starved(self, wait: float, wall: float) -> bool:
        """Over half of ``wall`` spent waiting, and more than 2 ms per batch."""
        return wall > 0 and wait / wall > _FRACTION and wait / self.batches > _MIN_WAIT_S

    def _busy(self, wall: float, cpu_wait: float) -> None:
        """The loop waited for batches, but because other processes held the CPUs: said once, as
        the busy-machine line, not as a finding (the same program gives the same findings anywhere)."""
        self.s.reporter.note(
            "dataloader-starvation", "busy-loader",
            f"this machine is busy: the loop spent {self.wait / wall:.0%} of its time waiting for batches "
            f"({self.wait / self.batches * 1000:.1f} ms per batch over {self.batches} batches, num_workers="
            f"{self.workers}), but for {cpu_wait / wall:.0%} of that time it was waiting for a CPU that other "
            "processes held; without that wait the loader keeps up, so dataloader-starvation is not reported.")
