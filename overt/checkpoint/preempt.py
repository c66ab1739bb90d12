"""Preemption: a signal asks the run to finish its step, save and exit.

The handler only records the signal and sets a flag (``trainer.should_stop``);
the loop ends at the next optimizer-step boundary and the checkpoint callback
saves there.  After a clean stop, ``overt train``/``overt resume`` exit with
``128 + signal number`` (143 for SIGTERM, 130 for SIGINT, 138 for SIGUSR1 on
Linux), the shell convention for "ended by this signal".

**One request, delivered several times, is one request.**  Schedulers signal
every process of a job at once (SLURM's ``scancel`` and time limit send SIGTERM to
each process of the job step; a container runtime signals the whole process
group), and torchrun's agent forwards the signal it got to its workers as well:
each worker gets the same SIGTERM two or more times within milliseconds.  Neither
SLURM nor Kubernetes ever sends a second SIGTERM on purpose: their escalation is
SIGKILL after the grace period (``KillWait``, ``terminationGracePeriodSeconds``,
30 s by default).  So a repeat within :data:`REPEAT_GRACE_S` seconds of the first
signal is taken as the same request.  A repeat after that, while the stop has not
happened yet, is a new request -- a person pressing Ctrl-C again because the stop
takes too long -- and ends the process at once (default action; no checkpoint of
the last steps, ``status.json`` says ``killed``).  Once the stop checkpoint is
saved, or the run has completed, :func:`ignore_after_stop` (set by the command line) keeps
further signals from killing a process that is only writing its final files and exiting:
torchrun's agent sends SIGTERM to the workers still running when the first one exits, and a
worker ending by that signal instead of its own ``128 + N`` would turn a clean stop into a
failed job; a preemption that lands after the last step would kill ``overt train`` while it
writes ``model.safetensors`` and ``summary.json``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType
from typing import Any, Callable

from overt.errors import ConfigError


def parse_signal(name: str) -> signal.Signals:
    """``"SIGUSR1"``, ``"USR1"`` or ``"10"`` -> the signal."""
    text = name.strip().upper()
    if text.isdigit():
        return signal.Signals(int(text))
    if not text.startswith("SIG"):
        text = "SIG" + text
    try:
        return signal.Signals[text]
    except KeyError:
        raise ConfigError(f"unknown signal {name!r} for preempt_signal",
                          fix="use a signal name such as SIGUSR1 or SIGUSR2") from None


def exit_code(sig: int) -> int:
    """The process exit status after a clean stop on ``sig``."""
    return 128 + int(sig)


#: seconds within which a repeat of the preemption signal is the same request (fan-out), not a new one
REPEAT_GRACE_S = 2.0

_ignore_after_stop = False


def ignore_after_stop(on: bool = True) -> None:
    """After a clean stop (the stop checkpoint saved), ignore the preemption signals for the rest of
    the process's life instead of restoring the previous handlers.  For a process that exits right
    after ``fit`` (``overt train``/``overt resume``); a library caller keeps its own handlers."""
    global _ignore_after_stop
    _ignore_after_stop = on


class PreemptionHandler:
    """Installs handlers for ``signals`` (main thread only); the first signal calls ``on_signal``."""

    def __init__(self, signals: list[signal.Signals], on_signal: Callable[[signal.Signals], None],
                 on_abort: Callable[[signal.Signals], None] | None = None):
        self.signals = signals
        self.on_signal = on_signal
        self.on_abort = on_abort  # called (errors ignored) before a second signal ends the process
        self.received: signal.Signals | None = None
        self.repeats = 0  # repeats of the request absorbed within the grace period
        self.grace_s = REPEAT_GRACE_S
        self._first_at: float | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def install(self) -> bool:
        """Install the handlers; ``False`` (nothing installed) outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return True

    def uninstall(self, finished: bool = False) -> None:
        """Restore the previous handlers; with :func:`ignore_after_stop`, once the run has ended
        (stopped on a signal, or ``finished``: its training done and its last checkpoint saved), ignore
        the signals instead of their default action: the process is only writing its final files and
        exiting.  A handler that was there before (a sweep's, a user's) is always restored."""
        for sig, previous in self._previous.items():
            default = previous in (None, signal.SIG_DFL, signal.default_int_handler)
            if _ignore_after_stop and default and (self.received is not None or finished):
                previous = signal.SIG_IGN
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.received is None:
            self.received = signal.Signals(signum)
            self._first_at = now
            self.on_signal(self.received)
            return
        if self._first_at is None or now - self._first_at < self.grace_s:
            self.repeats += 1  # the same request delivered again (scheduler + agent): nothing new
            if self._first_at is None:  # the stop was agreed with other ranks, this one's own copy arrives
                self._first_at = now
            return
        # a new request after the grace period: stop now, the way the signal's default action does
        signal.signal(signum, signal.SIG_DFL)
        if self.on_abort is not None:
            try:
                self.on_abort(signal.Signals(signum))
            except Exception:  # noqa: BLE001 - nothing may delay the stop
                pass
        os.kill(os.getpid(), signum)
