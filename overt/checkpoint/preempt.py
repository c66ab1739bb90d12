"""Preemption: a signal asks the run to finish its step, save and exit.

The handler only records the signal and sets a flag (``trainer.should_stop``);
the loop ends at the next optimizer-step boundary and the checkpoint callback
saves there.  A second signal restores the default action and re-sends itself:
the process ends at once.  After a clean stop, ``overt train``/``overt resume``
exit with ``128 + signal number`` (143 for SIGTERM, 130 for SIGINT, 138 for
SIGUSR1 on Linux), the shell convention for "ended by this signal".
"""

from __future__ import annotations

import os
import signal
import threading
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


class PreemptionHandler:
    """Installs handlers for ``signals`` (main thread only); the first signal calls ``on_signal``."""

    def __init__(self, signals: list[signal.Signals], on_signal: Callable[[signal.Signals], None],
                 on_abort: Callable[[signal.Signals], None] | None = None):
        self.signals = signals
        self.on_signal = on_signal
        self.on_abort = on_abort  # called (errors ignored) before a second signal ends the process
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def install(self) -> bool:
        """Install the handlers; ``False`` (nothing installed) outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return True

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)
            self.on_signal(self.received)
            return
        # second signal: stop now, the way the signal's default action does
        signal.signal(signum, signal.SIG_DFL)
        if self.on_abort is not None:
            try:
                self.on_abort(signal.Signals(signum))
            except Exception:  # noqa: BLE001 - nothing may delay the stop
                pass
        os.kill(os.getpid(), signum)
