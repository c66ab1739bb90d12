"""A busy machine: torch's intra-op threads waiting for cores (said once, as an info line).

On a machine whose other processes take the cores, torch's default of one intra-op thread per
core makes every step wait for all of its threads: training can be many times slower than with
one thread, and nothing else says why.  :class:`BusyProbe` compares the process's CPU time with
the wall time over the first optimizer steps (after the first, which pays for warm-up): when
the process got less than ``SHARE`` of a core while it ran more than one thread and the load
average exceeds the CPUs it may use, the machine is oversubscribed, and one line says so with the
fix (``threads=1``).  It is never a catalog finding (exit codes do not change), costs one clock
read per step until it has judged, and ``OVERT_BUSY_NOTE=0`` turns it off (the test suite does,
so that no test depends on how busy the machine is).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from overt.engine.callbacks import Callback

#: environment variable: "0" turns the note off
ENV = "OVERT_BUSY_NOTE"
#: steps measured (after the first), and the least wall time they must span to be judged
STEPS = 20
MIN_WALL_S = 0.5
#: give up after this many steps when they never span MIN_WALL_S (a tiny run: nothing to gain)
MAX_STEPS = 400
#: CPU seconds per wall second below which the threads are starved
SHARE = 0.5


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


class _Schedstat:
    """This thread's ``/proc/thread-self/schedstat``, kept open (a read is then one system call);
    closed when the thread ends (its thread-local storage goes away)."""

    __slots__ = ("fd", "pid")

    def __init__(self) -> None:
        self.pid = os.getpid()
        try:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:  # not Linux, or /proc not mounted
            self.fd = -1

    def read(self) -> float | None:
        if self.fd < 0:
            return None
        try:
            return int(os.pread(self.fd, 128, 0).split()[1]) / 1e9
        except (OSError, ValueError, IndexError, AttributeError):
            return None

    def __del__(self) -> None:
        if self.fd >= 0 and self.pid == os.getpid():
            try:
                os.close(self.fd)
            except OSError:
                pass


_THREAD = threading.local()


def run_queue_wait() -> float | None:
    """Seconds the calling thread has spent runnable but waiting for a CPU since it started (the
    second field of Linux's ``/proc/thread-self/schedstat``), or None where the system does not
    say.  On an oversubscribed machine it grows with the time other processes hold the cores;
    a thread that sleeps or waits for I/O or a queue does not add to it."""
    st = getattr(_THREAD, "schedstat", None)
    if st is None or st.pid != os.getpid():  # (a forked child has threads of its own)
        st = _THREAD.schedstat = _Schedstat()
    return st.read()


def load_average() -> float | None:
    """The 1-minute load average, where the system has one."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def note(cpu_s: float, wall_s: float, threads: int, load: float | None, cpus: int, fix: str) -> str | None:
    """The info line for ``cpu_s`` of process CPU time in ``wall_s`` of training with ``threads``
    intra-op threads, or None when nothing says the machine is oversubscribed."""
    if threads <= 1 or wall_s <= 0 or load is None:
        return None
    share = cpu_s / wall_s
    if share >= SHARE or load < cpus:
        return None
    return (f"overt: info: this machine is busy (load average {load:.1f} on {cpus} CPU(s)): over the first steps "
            f"training got {share:.2f} CPU-seconds per second with {threads} intra-op threads, so each step waits "
            f"for cores other processes hold and runs far slower than it could. Fix: {fix}.")


class BusyProbe:
    """Call :meth:`step` after each optimizer step; it returns the note once, when it applies."""

    def __init__(self, fix: str = "threads=1", *, cpu: Callable[[], float] = time.process_time,
                 wall: Callable[[], float] = time.perf_counter, load: Callable[[], float | None] | None = None,
                 threads: Callable[[], int] | None = None):
        import torch

        self.fix, self._cpu, self._wall, self._load = fix, cpu, wall, load
        self._threads = threads or torch.get_num_threads
        self.done = os.environ.get(ENV, "1") == "0"
        self.steps = 0
        self._start: tuple[float, float] | None = None

    def step(self) -> str | None:
        if self.done:
            return None
        self.steps += 1
        if self.steps == 1:  # the first step pays for warm-up: measure from its end
            self._start = (self._cpu(), self._wall())
            return None
        if self.steps <= STEPS or self._start is None:
            return None
        wall = self._wall() - self._start[1]
        if wall < MIN_WALL_S and self.steps < MAX_STEPS:
            return None
        self.done = True
        load = (self._load or load_average)()
        return note(self._cpu() - self._start[0], wall, self._threads(), load, available_cpus(), self.fix)


class BusyNote(Callback):
    """:class:`BusyProbe` in overt's engine (CPU training only), printed to ``stream`` (stderr)."""

    def __init__(self, stream: Any = None):
        self.stream = stream
        self.probe: BusyProbe | None = None

    def on_fit_start(self, trainer: Any) -> None:
        self.probe = BusyProbe("threads=1 (or OMP_NUM_THREADS=1)") if trainer.device.type == "cpu" else None

    def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
        if self.probe is not None and not self.probe.done:
            text = self.probe.step()
            if text:
                import sys

                print(text, file=self.stream or sys.stderr, flush=True)
