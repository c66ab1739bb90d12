"""``debug_anomaly=true``: the run under ``torch.autograd`` anomaly mode.

Every backward then checks each operation's gradient for NaN and remembers the forward call
of every node, so the first operation that produces NaN raises at once, and PyTorch prints the
forward line that called it ("Error detected in LogBackward0. Traceback of forward call ...");
the engine turns the error into one that names the operation and the fix
(:func:`overt.engine.explain.backward_error`).  It makes training several times slower: a
debugging setting, composed into a run only when asked (:mod:`overt.compose`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.engine.callbacks import Callback

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class AnomalyMode(Callback):
    """Anomaly mode on from ``on_fit_start`` to the end of the run (restored as it was)."""

    def __init__(self) -> None:
        self._previous: tuple[bool, bool] | None = None

    def on_fit_start(self, trainer: Trainer) -> None:
        self._previous = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
        torch.autograd.set_detect_anomaly(True, check_nan=True)

    def _restore(self) -> None:
        if self._previous is not None:
            torch.autograd.set_detect_anomaly(*self._previous)
            self._previous = None

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._restore()

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        self._restore()
