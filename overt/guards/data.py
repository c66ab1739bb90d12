"""Guards on the data pipeline (slugs ``dataloader-starvation``, ``too-many-workers``) and the batch index.

:mod:`overt.guards.patches` times every ``next()`` on a DataLoader iterator.
At checked steps the guard compares the time spent waiting for batches with
the wall time since the last check (the first batch of each pass, which
includes starting the worker processes, is left out).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from overt.engine.busy import available_cpus
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
        frac = self.wait / wall if wall > 0 else 0.0
        mean = self.wait / self.batches
        if frac > _FRACTION and mean > _MIN_WAIT_S:
            self.s.report(
                "dataloader-starvation",
                f"the loop spent {frac:.0%} of its time waiting for the next batch ({mean * 1000:.1f} ms "
                f"per batch over {self.batches} batches, num_workers={self.workers}): the model waits "
                "for data.",
                fix="DataLoader(num_workers=N, pin_memory=True, persistent_workers=True), "
                "and move heavy work out of __getitem__ (pre-decode, cache, or batch transforms).",
                where=f"DataLoader, {self.batches} batches before step {self.s.run_step(self.s.step)}", key="loader",
            )
        self.wait = 0.0
        self.batches = 0
