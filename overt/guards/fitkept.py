"""Guard on a fitted parameter used where its fit left it after the fit got worse (slug ``diverged-fit-kept``,
issue 33: a chosen value is the best one).

The premise: a value a program fits and then goes on with -- a calibration temperature, a scale, a few
parameters fitted to validation data -- is no worse, on the objective it was fitted on, than the value the fit
started from.  ``torch.optim.LBFGS`` without a line search (its default) takes full steps and can overshoot:
its losses then climb far above the first one, and the parameters it leaves are those of its last step, not of
its best loss.  A program that reads them goes on with a fit worse than no fit at all
(autogluon/autogluon#4396: temperature scaling kept the optimiser's last temperature, -1242, and the calibrated
model's ROC AUC fell from 0.915 to 0.099; the fix keeps the temperature of the lowest loss).

Seen with step hooks on every ``LBFGS`` built while a session is active whose parameters hold at most
:data:`MAX_NUMEL` values (a calibration or tuning parameter, not a network): the losses its closure returns in
one ``step()`` are noted (LBFGS reads each as a number itself, so no extra synchronisation).  A step whose last
loss is at least :data:`RATIO` times its first (and :data:`MIN_RISE` above it) leaves its parameters *pending*:
while any is, the tensor methods that read a value (``item``, ``tolist``, ``float()``, ``*``, ``/``, ``mul``,
``div``, ``clone``, ``detach``) are wrapped, and a call from the user's code that reads a pending parameter is
reported, once per optimizer (the wrappers are put back once nothing is pending, or after
:data:`MAX_WATCHED` calls).  Silent when the program keeps the best value it saw instead (it never reads the
diverged parameter again), when the optimizer steps again (a fit that goes on may recover: the parameters are
no longer pending), for a fit that ends no worse than it started, for large parameter sets (a network trained by
LBFGS), and for non-finite losses (reported by the loss checks).
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from typing import Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.where import is_user_file, user_location_from

MAX_NUMEL = 4096  # the parameters of a calibration or tuning fit, not of a network
RATIO = 2.0  # the last loss of a step against its first
MIN_RISE = 1e-3  # and at least this much above it
MAX_WATCHED = 200_000  # wrapped tensor-method calls after which a pending parameter is given up
_READS = ("item", "tolist", "__float__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "mul", "div",
          "clone", "detach")

#: id(parameter) -> (a weak reference to it, the check to report to, what the fit did)
_PENDING: dict[int, tuple[Any, Any, dict]] = {}
_COUNT = [0]  # wrapped calls since the methods were last wrapped
_SAVED: dict[str, Any] = {}  # name -> torch.Tensor's own method replaced while a parameter is pending (None: none)


def _caller_location() -> str | None:
    frame = sys._getframe(2)
    return user_location_from(frame) if is_user_file(frame.f_code.co_filename) else None


def _pending_in(self: Any, args: tuple) -> tuple[Any, dict] | None:
    for t in (self,) + args[:1]:
        entry = _PENDING.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1], entry[2]
    return None


def _read_wrapper(name: str, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _PENDING:
            _COUNT[0] += 1
            if _COUNT[0] > MAX_WATCHED:  # the program has long moved on: stop paying for the wrappers
                _PENDING.clear()
                _unwatch_reads()
                return orig(self, *args, **kwargs)
            try:
                hit = _pending_in(self, args)
                if hit is not None:
                    loc = _caller_location()
                    if loc is not None:
                        hit[0].read(hit[1], name, loc)
            except Exception:  # noqa: BLE001  never break the user's call over a check
                pass
        return orig(self, *args, **kwargs)

    return read


def _watch_reads() -> None:
    if _SAVED:
        return
    _COUNT[0] = 0
    for name in _READS:
        orig = getattr(torch.Tensor, name, None)
        if orig is None:
            continue
        _SAVED[name] = torch.Tensor.__dict__.get(name)  # None: inherited from torch's C base class
        setattr(torch.Tensor, name, _read_wrapper(name, orig))


def _unwatch_reads() -> None:
    for name, own in list(_SAVED.items()):
        if own is None:
            delattr(torch.Tensor, name)
        else:
            setattr(torch.Tensor, name, own)
    _SAVED.clear()


def _forget(check: Any, opt_id: int | None = None) -> None:
    """Drop the pending parameters of ``check`` (of one optimizer when ``opt_id`` is given)."""
    for key, (_, owner, info) in list(_PENDING.items()):
        if owner is check and (opt_id is None or info["opt"] == opt_id):
            del _PENDING[key]
    if not _PENDING:
        _unwatch_reads()


class DivergedFitChecks(Check):
    name = "fitkept"

    def __init__(self, session: Any):
        super().__init__(session)
        self.handles: list[Any] = []
        self.losses: dict[int, list[float]] = {}
        self.done: set[int] = set()

    def built(self, opt: Any, where: str | None) -> None:
        """An optimizer was built at ``where``: hook an LBFGS over a small parameter set."""
        if not isinstance(opt, torch.optim.LBFGS):
            return
        params = [p for g in opt.param_groups for p in g["params"]]
        if not params or sum(p.numel() for p in params) > MAX_NUMEL:
            return
        ref = weakref.ref(self)
        opt_where = where or "an LBFGS optimizer"

        def pre(o: Any, args: tuple, kwargs: dict) -> Any:
            check = ref()
            return None if check is None else check._pre(o, args, kwargs)

        def post(o: Any, args: tuple, kwargs: dict) -> None:
            check = ref()
            if check is not None:
                check._post(o, opt_where)

        self.handles.append(opt.register_step_pre_hook(pre))
        self.handles.append(opt.register_step_post_hook(post))

    def _pre(self, opt: Any, args: tuple, kwargs: dict) -> Any:
        _forget(self, id(opt))  # the fit goes on: what the last step left is no longer what the program keeps
        closure = args[1] if len(args) > 1 else kwargs.get("closure")
        if not callable(closure) or id(opt) in self.done:
            return None
        losses = self.losses[id(opt)] = []

        def noted(*a: Any, **k: Any) -> Any:
            loss = closure(*a, **k)
            try:
                losses.append(float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss))
            except Exception:  # noqa: BLE001  a closure that returns no number
                pass
            return loss

        return ((args[0], noted, *args[2:]), kwargs) if len(args) > 1 else (args, {**kwargs, "closure": noted})

    def _post(self, opt: Any, where: str) -> None:
        losses = self.losses.pop(id(opt), None)
        if not losses or len(losses) < 3 or not all(math.isfinite(v) for v in losses):
            return
        first, last, best = losses[0], losses[-1], min(losses)
        if not (last >= RATIO * first and last - first >= MIN_RISE):
            return
        info = {"opt": id(opt), "where": where, "first": first, "last": last, "best": best, "n": len(losses)}
        for g in opt.param_groups:
            for p in g["params"]:
                _PENDING[id(p)] = (weakref.ref(p), self, info)
        _watch_reads()

    def read(self, info: dict, how: str, loc: str) -> None:
        """A pending parameter of the fit ``info`` was read by ``how`` at ``loc``."""
        if info["opt"] in self.done:
            return
        self.done.add(info["opt"])
        _forget(self, info["opt"])
        self.s.report(
            "diverged-fit-kept",
            f"{loc} reads a parameter fitted by the LBFGS optimizer built at {info['where']} where its last step "
            f"left it, but that step made the fit worse than it started: its closure's loss went from "
            f"{info['first']:.4g} (the starting value) to {info['last']:.4g} at its last evaluation (best "
            f"{info['best']:.4g}, {info['n']} evaluations). LBFGS without a line search takes full steps and can "
            "overshoot; the value the program goes on with is worse, on the objective it was fitted on, than no fit "
            "at all (a calibration temperature that turned negative reverses every ranking).",
            fix="keep the parameter of the lowest loss the closure saw (note it in the closure and use that), or "
            "fit with line_search_fn='strong_wolfe' (each step then lowers the loss), and check the fitted value "
            "against the starting one before using it.",
            where=f"LBFGS fit at {info['where']}", key=str(info["where"]))

    def end_of_run(self) -> None:
        _forget(self)

    def remove_hooks(self) -> None:
        _forget(self)
        for h in self.handles:
            h.remove()
        self.handles.clear()
