"""Deferred device reads: checks queue device tensors, read together once per checked step.

A check that needs a value from the device (a norm, the extremes of a batch, a
loss) does not call ``.item()``: it queues the tensor with a callback
(:meth:`DeferredReads.defer`).  :meth:`DeferredReads.flush` -- called by the
session once per checked step and at the end of the run -- concatenates every
queued value per device and reads it with one ``tolist()`` (one host-device
synchronisation per device), then runs the callbacks with the values.
"""

from __future__ import annotations

from typing import Callable

import torch

Callback = Callable[[list[float]], None]


class DeferredReads:
    """The queue of one session.  ``on_error(callback, exc)`` is told when a callback raises
    (the other callbacks still run); an :class:`~overt.guards.report.GuardError` raised on
    purpose by a callback (``stop``) is in ``passthrough`` and propagates."""

    def __init__(self, on_error: Callable[[Callback, Exception], None], passthrough: type[BaseException]):
        self.pending: list[tuple[torch.Tensor, Callback]] = []
        self.can_stop = True  # whether the callbacks being run may stop the run (not at its end)
        self._on_error = on_error
        self._passthrough = passthrough

    def defer(self, value: torch.Tensor, callback: Callback) -> None:
        """Queue a device tensor (computed from detached values); ``callback(values)`` runs at
        the next :meth:`flush` with its elements as Python numbers."""
        if value.device.type == "meta":
            return
        self.pending.append((value, callback))

    def clear(self) -> None:
        self.pending = []

    def flush(self, can_stop: bool = True) -> None:
        """Read every queued value at once (one synchronisation per device) and run the callbacks."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        tensors = []
        host = True
        for t, _ in pending:
            if t.requires_grad:
                t = t.detach()
            if type(t).__name__ == "DTensor":  # FSDP2: this rank's part of the value (no collective here)
                t = t.to_local()
            tensors.append(t)
            if host and t.device.type != "cpu":
                host = False
        if host:
            # host memory: nothing to synchronise, so each value is read as it is (no concatenation; a
            # scalar by item(), with no reshape)
            self._run(pending, [[t.item()] if t.dim() == 0 else t.tolist() if t.dim() == 1 else t.reshape(-1).tolist()
                                for t in tensors], can_stop)
            return
        flats = [t if t.dim() == 1 else t.reshape(-1) for t in tensors]
        device = flats[0].device
        if all(f.device == device for f in flats):
            groups = [list(range(len(flats)))]
        else:
            by_device: dict[torch.device, list[int]] = {}
            for i, f in enumerate(flats):
                by_device.setdefault(f.device, []).append(i)
            groups = list(by_device.values())
        values: list[list[float]] = [[] for _ in pending]
        for idx in groups:
            # one read per device; cat promotes bool/int/half to a common dtype
            flat = torch.cat([flats[i] for i in idx]).tolist() if len(idx) > 1 else flats[idx[0]].tolist()
            pos = 0
            for i in idx:
                n = flats[i].numel()
                values[i] = flat[pos:pos + n]
                pos += n
        self._run(pending, values, can_stop)

    def _run(self, pending: list[tuple[torch.Tensor, Callback]], values: list[list[float]], can_stop: bool) -> None:
        self.can_stop = can_stop
        for (_, cb), vals in zip(pending, values):
            try:
                cb(vals)
            except self._passthrough:
                raise
            except Exception as exc:
                self._on_error(cb, exc)
