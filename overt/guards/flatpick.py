"""Guard on a choice made by ``argmax``/``argmin`` over a curve whose values are all equal (slug
``choice-over-flat-curve``, issue 33: a chosen value is the best one).

The premise: a program that picks a point of a grid by the best score on it (a decision threshold by the
F1 it gives, a temperature, a regularisation strength, an epoch) relies on the scores telling the points
apart.  Over a curve whose values are all equal the choice carries no information: ``argmax`` returns the
first point of the grid whatever the grid is, and the program goes on with an end of its grid as if it were
the best value (open-edge-platform/anomalib#2433: an F1-adaptive threshold fitted on a validation set with
no anomalies takes the argmax of an all-zero F1 curve, so the threshold is the lowest normal score and almost
everything is called anomalous at test time).

Seen with wrappers of ``numpy.argmax``/``numpy.argmin`` (for the session) and, for ``torch.argmax``/``torch.argmin``
and the tensor methods, through :mod:`overt.guards.predshape`'s wrappers, which are in place from a watched model's
evaluation (``eval()``, a ``no_grad`` forward: its first evaluations) until its training resumes, and (session 56)
from a ``no_grad`` forward of a watched model without Dropout/BatchNorm left in training mode (an evaluation without
``eval()``: the mode changes nothing it computes) until its next training forward (its first few such forwards:
a flat choice seen there is judged only when training took no step after it, since the later calls of a choice
made between steps run in no window) -- torch's own functions run unwrapped on training steps -- each called directly from the user's code, on a *curve*: a
one-dimensional floating-point tensor on the CPU (or a numpy array, or a list of numbers) of at least
:data:`MIN_POINTS` values, made as a whole (not a view into a table: a row of a Q-table or of a batch's
logits is not a curve built to choose from), every value finite.  Judged at the end of the run, once per call
site: reported when every curve that call site chose from was flat.  A call site that once chose from a curve
with a difference is a choice that can work, and its flat calls are ties the program may mean (the first actions
of a bandit or tabular agent whose value estimates all start at zero): silent.  Silent too for integer counts
(votes, bin counts), a 2-D argmax (a batch's predictions), views, curves on an accelerator (reading them would
synchronise), and calls made by libraries.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.swapped import Swapped
from overt.guards.where import is_user_file, user_location_from

MIN_POINTS = 3  # a grid of fewer points is no curve
MAX_POINTS = 1 << 20  # larger 1-D tensors are not a grid of candidate values (and cost a pass to check)


def _curve_range(x: Any) -> tuple[float, float, int] | None:
    """``(lowest, highest, points)`` of a curve, or None when ``x`` is not a curve built to choose from."""
    if isinstance(x, torch.Tensor):
        if x.dim() != 1 or not x.is_floating_point() or x.device.type != "cpu" or x._base is not None \
                or x.requires_grad or not MIN_POINTS <= x.numel() <= MAX_POINTS:
            return None
        lo, hi = torch.aminmax(x)
        return float(lo), float(hi), x.numel()
    import numpy as np

    if isinstance(x, np.ndarray):
        if x.ndim != 1 or x.dtype.kind != "f" or x.base is not None or not MIN_POINTS <= x.size <= MAX_POINTS:
            return None
        arr = x
    elif isinstance(x, (list, tuple)):
        if not MIN_POINTS <= len(x) <= MAX_POINTS or not all(isinstance(v, (float, np.floating)) for v in x):
            return None
        arr = np.asarray(x, dtype=np.float64)
    else:
        return None
    return float(arr.min()), float(arr.max()), int(arr.size)


def _flat_value(x: Any) -> float | None:
    """The common value of a curve whose values are all equal, or None (not a curve, or not flat)."""
    r = _curve_range(x)
    if r is None:
        return None
    lo_v, hi_v, _ = r
    if lo_v != hi_v or lo_v != lo_v or abs(lo_v) == float("inf"):
        return None
    return lo_v


class FlatChoiceChecks(Check):
    name = "flatpick"

    def __init__(self, session: Any):
        super().__init__(session)
        #: call sites that chose from a curve with a difference: choices that can work, never judged again
        self.varied: set[str] = set()
        #: call site -> (function, points, common value) of the first flat curve it chose from
        self.flat: dict[str, tuple[str, int, float]] = {}
        #: call site -> the optimizer steps done at its latest flat choice seen in a training-mode window (an
        #: evaluation without ``eval()``): judged only if training took no step after it
        self.late: dict[str, int] = {}

    def on_choice(self, fn: str, curve: Any, loc: str) -> None:
        """``fn`` (``"torch.argmax"``, ...) was called at ``loc`` on ``curve``."""
        if loc in self.varied:
            return
        r = _curve_range(curve)
        if r is None:
            return
        lo_v, hi_v, n = r
        if lo_v != hi_v:
            self.varied.add(loc)
            self.flat.pop(loc, None)
            return
        if lo_v != lo_v or abs(lo_v) == float("inf"):
            return
        self.flat.setdefault(loc, (fn, n, lo_v))

    def seen_choice(self, fn: str, args: tuple, kwargs: dict, frame: Any, late: bool = False) -> None:
        """torch's ``argmax``/``argmin`` (the function or the tensor method, ``fn``) was called from ``frame``
        while a model's evaluation outputs are watched (:mod:`overt.guards.predshape`'s wrappers, in place
        only then: unchecked training runs the originals), or through this module's own wrappers in a training-mode
        window (``late``: the choice is judged only if no optimizer step follows it)."""
        if not args or not _over_the_curve(args, kwargs):
            return
        loc = _user_caller(frame)
        if loc is None:
            return
        self.on_choice(fn, args[0], loc)
        if loc in self.flat and late:
            self.late[loc] = self.s.step

    # -- the window of a training-mode no_grad forward (opened by overt.guards.predshape) ------------------------
    def window_open(self) -> bool:
        return self in _CHOICES.listening

    def open_window(self) -> None:
        """A ``no_grad`` forward of a model the mode does not change, left in training mode: an evaluation without
        ``eval()``; torch's ``argmax``/``argmin`` are wrapped until :meth:`close_window`."""
        _CHOICES.listen(self)

    def close_window(self) -> None:
        _CHOICES.stop(self)

    def remove_hooks(self) -> None:
        self.close_window()

    def end_of_run(self) -> None:
        for loc, (fn, n, value) in self.flat.items():
            if loc in self.varied:
                continue
            if loc in self.late and self.late[loc] != self.s.step:
                # chosen in a training-mode window and training stepped on: a choice the program makes while it
                # trains (an agent's greedy action), whose later calls ran in no window and went unseen
                continue
            self._report(fn, n, value, loc)

    def _report(self, fn: str, n: int, value: float, loc: str) -> None:
        self.s.report(
            "choice-over-flat-curve",
            f"{fn} at {loc} chose from curves that were all flat ({n} values, all {value:g}, the first time): over "
            f"a flat curve the choice carries no information, and {fn.rsplit('.', 1)[-1]} returns the first point "
            "(index 0) whatever the grid is, so the value the program goes on with (a threshold, a temperature, a "
            "hyperparameter, an epoch chosen by its score) is an end of its grid, not the best one; a validation "
            "set without the class a score needs (no positives for an F1, a precision or a recall) gives such a "
            "curve.",
            fix="test that the curve varies before choosing from it (curve.max() > curve.min()) and fall back to a "
            "value the data supports when it does not (the largest normal score for an anomaly threshold, a "
            "default), or score the grid on data that holds every class the score needs.",
            where=f"{fn} call at {loc}", key=loc)


def _user_caller(frame: Any = None) -> str | None:
    """``file.py:LINE`` of the wrapper's caller (or of ``frame``) when it is the user's code, else None."""
    frame = frame if frame is not None else sys._getframe(2)
    if not is_user_file(frame.f_code.co_filename):
        return None
    return user_location_from(frame)


def _over_the_curve(args: tuple, kwargs: dict) -> bool:
    """An argmax/argmin over the whole of its first argument (no dim/axis, or 0 or -1 of a 1-D curve)."""
    return not (args[1:2] and args[1] not in (0, -1, None)) and kwargs.get("dim", kwargs.get("axis")) in (0, -1, None)


def _wrapper(active: list, fn: str, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def choose(x: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(x, *args, **kwargs)
        if not active or torch.compiler.is_compiling():
            return out
        try:
            if not _over_the_curve((x,) + args, kwargs):
                return out
            loc = _user_caller()
            if loc is None:
                return out
            for s in active:
                try:
                    s.flatpick.on_choice(fn, x, loc)
                except Exception as exc:  # never break the user's call over a check
                    s.check_failed(s.flatpick, exc)
        except Exception:  # noqa: BLE001
            pass
        return out

    return choose


def install(patch: Callable, active: list) -> None:
    """Wrap ``numpy.argmax``/``argmin`` with ``patch(owner, name, make)``.  torch's functions and tensor methods
    are seen through :mod:`overt.guards.predshape`'s wrappers, in place while a model's evaluation outputs are
    watched (torch's own stay unwrapped on training steps)."""
    import numpy as np

    for name in ("argmax", "argmin"):
        patch(np, name, functools.partial(_wrapper, active, f"np.{name}"))


def _choice(orig: Callable, owner: Any, name: str) -> Callable:
    shown = f"{'torch' if owner is torch else 'Tensor'}.{name}"

    @functools.wraps(orig)
    def choose(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if args and _CHOICES.listening and not torch.compiler.is_compiling():
            frame = sys._getframe(1)
            for check in list(_CHOICES.listening):
                try:
                    check.seen_choice(shown, args, kwargs, frame, late=True)
                except Exception as exc:  # noqa: BLE001  never break the user's call over a check
                    check.s.check_failed(check, exc)
        return out

    return choose


# torch's argmax/argmin while a training-mode no_grad forward's evaluation lasts (never with predshape's set, which
# wraps them too in eval-mode evaluations: predshape closes this one before it opens its own)
_CHOICES = Swapped(((torch, "argmax"), (torch, "argmin"), (torch.Tensor, "argmax"), (torch.Tensor, "argmin")), _choice)
