"""Process-wide instrumentation, installed while at least one guard session is active.

- the loss functions of ``torch.nn.functional`` (``nn`` loss modules call them);
- ``next()`` on DataLoader iterators (batch index, time waiting for data, epochs);
- ``torch.load`` (``weights_only=False`` is reported as ``unsafe-load``);
- ``LRScheduler.step`` (to find the schedulers that drive a watched optimizer);
- ``nn.Module.train`` and entering ``torch.no_grad``/``inference_mode``: they
  arm the forward checks for the next few forwards (between checked steps the
  forward hook is not installed: it costs microseconds per call).

Every wrapper returns straight to PyTorch when no session is active, and
DataLoader worker processes never report (see :class:`~overt.guards.report.Reporter`).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.optim import lr_scheduler as _sched
from torch.utils.data import dataloader as _dl

from overt.guards.report import GuardError
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

ACTIVE: list[GuardSession] = []
ARMED = False  # some active session is in a checked step: loss wrappers look at their arguments
_ORIGINALS: dict[tuple[Any, str], Any] = {}
LOSSES = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")


def _safely(fn: Any, *args: Any) -> Any:
    """Run a check; a guard's own failure must never break the user's program
    (a :class:`GuardError` that stops the run is not a failure)."""
    try:
        return fn(*args)
    except GuardError:
        raise
    except Exception:  # pragma: no cover - defensive
        return None


def _loss_wrapper(name: str, orig: Any) -> Any:
    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not ARMED:
            try:
                return orig(*args, **kwargs)
            except Exception:
                for s in ACTIVE:
                    _safely(s.losses.on_error, name, args, kwargs)
                raise
        sessions = ACTIVE
        watch = [s for s in sessions if _safely(s.losses.before, name, args, kwargs)]
        try:
            out = orig(*args, **kwargs)
        except Exception:
            for s in sessions:
                _safely(s.losses.on_error, name, args, kwargs)
            raise
        for s in watch:
            _safely(s.losses.after, name, out)
        return out

    wrapper.__overt_original__ = orig  # type: ignore[attr-defined]
    return wrapper


def _next_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __next__(self: Any) -> Any:
        sessions = ACTIVE
        if not sessions:
            return orig(self)
        start = getattr(self, "_num_yielded", 1) == 0
        if start:
            for s in sessions:
                s.scheds.epoch_boundary()
                s.arm_forwards(3)  # a training epoch or an evaluation pass begins
        t0 = time.perf_counter()
        batch = orig(self)
        waited = time.perf_counter() - t0
        index = getattr(self, "_num_yielded", 0) - 1
        workers = getattr(self, "_num_workers", 0)
        total = getattr(self, "_overt_len", None)
        if total is None:
            try:
                total = len(self)
            except TypeError:
                total = -1
            self._overt_len = total
        for s in sessions:
            s.data.on_batch(waited, index, workers)
            if index == total - 1:
                s.arm_forwards(1)  # the last batch may be a tiny one
        return batch

    return __next__


def _load_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def load(*args: Any, **kwargs: Any) -> Any:
        if ACTIVE and kwargs.get("weights_only") is False:
            loc = user_location(2) or ""
            target = args[0] if args else kwargs.get("f", "?")
            for s in ACTIVE:
                s.report(
                    "unsafe-load",
                    f"torch.load({target!r}, weights_only=False) unpickles arbitrary objects: a "
                    f"checkpoint from anyone else can run code on this machine. Fix: save state_dicts "
                    f"(or safetensors) and load with weights_only=True (the default since torch 2.6).",
                    where=f"torch.load at {loc}" if loc else "torch.load", key=loc or str(target),
                )
        return orig(*args, **kwargs)

    return load


def _sched_step_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        for s in ACTIVE:
            if id(self) not in s.scheds.ids:
                s.scheds.add(self)
        return orig(self, *args, **kwargs)

    return step


def _train_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def train(self: Any, mode: bool = True) -> Any:
        out = orig(self, mode)
        for s in ACTIVE:
            if id(self) in s.models:
                s.arm_forwards(3)  # model.train()/eval(): a phase begins
        return out

    return train


def _enter_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __enter__(self: Any) -> Any:
        out = orig(self)
        for s in ACTIVE:
            s.arm_forwards(2, only_dropbn_training=True)  # an evaluation without eval()?
        return out

    return __enter__


def _patch(owner: Any, name: str, make: Any) -> None:
    orig = getattr(owner, name)
    _ORIGINALS[(owner, name)] = orig
    setattr(owner, name, make(orig))


def activate(session: GuardSession) -> None:
    """Register ``session``; install the wrappers for the first one."""
    if not ACTIVE:
        for name in LOSSES:
            if hasattr(F, name):
                _patch(F, name, functools.partial(_loss_wrapper, name))
        _patch(_dl._BaseDataLoaderIter, "__next__", _next_wrapper)
        _patch(torch, "load", _load_wrapper)
        _patch(_sched.LRScheduler, "step", _sched_step_wrapper)
        _patch(torch.nn.Module, "train", _train_wrapper)
        _patch(torch.no_grad, "__enter__", _enter_wrapper)
        _patch(torch.inference_mode, "__enter__", _enter_wrapper)
    ACTIVE.append(session)
    refresh()


def refresh() -> None:
    """Recompute :data:`ARMED` after a session's checked/unchecked state changed."""
    global ARMED
    ARMED = any(s.armed for s in ACTIVE)


def deactivate(session: GuardSession) -> None:
    """Unregister ``session``; restore PyTorch when it was the last one."""
    if session in ACTIVE:
        ACTIVE.remove(session)
    if not ACTIVE:
        for (owner, name), orig in list(_ORIGINALS.items()):
            setattr(owner, name, orig)
        _ORIGINALS.clear()
    refresh()
