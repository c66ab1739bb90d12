"""Guard on a transform whose named inverse does not undo it (slug ``inverse-transform-not-inverse``; issue
33, the wild corpus's w186).

An invariant of every correct program: a method and the method its class names as its inverse --
``normalize``/``denormalize``, ``norm``/``denorm``, ``transform``/``inverse_transform``, ``scale``/``unscale``,
``f``/``inverse_f`` -- compose to the identity on the data the program feeds them.  Reversible instance
normalisation whose ``normalize`` only centres while ``denormalize`` also multiplies by the standard deviation
(WenjieDu/PyPOTS#453), a target scaler whose inverse adds the mean it never subtracted, a log transform undone
by another base: the model trains in one space and its outputs are put back into another, every forecast is
off by the statistics, and nothing fails.

What is done: on the first checked training forwards of a watched model (three at most per model), the
model's submodules and the objects in the user's frames (locals and module globals) whose class is the
user's own and defines such a pair are noted; the forward method of each (eight objects at most) is wrapped
on its class for that object's next call only (within two steps; other instances pass straight through).  At that call, the inverse is applied once to the output
(``no_grad``; the object's attributes and the random state put back after): where the output is not
exactly zero (a mask zeroes what it leaves out) the result must give back the input.  Reported when, over
16 or more such elements, at least half differ from the input by more than 1e-4 of their scale.  Silent:
an inverse that needs more than the one argument, outputs of another shape than the input (an encoder, a
forecast horizon), classes of libraries, transforms that clamp or quantise a minority of the elements.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from overt.guards.check import Check
from overt.guards.where import class_location, user_class, user_frames, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 3  # checked forwards per model that look for pairs
EARLY = 8  # among a model's first forwards (counted from when it is watched)
MAX_OBJECTS = 8
_ABSENT = object()
MIN_ELEMENTS = 16
TOL = 1e-4
FAIL_SHARE = 0.5
_PAIRS = (("normalize", "denormalize"), ("normalise", "denormalise"), ("normalize", "unnormalize"),
          ("normalise", "unnormalise"), ("norm", "denorm"), ("transform", "inverse_transform"),
          ("scale", "unscale"), ("standardize", "destandardize"), ("standardise", "destandardise"))


def _pairs_of(cls: type) -> list[tuple[str, str]]:
    """The (method, inverse) pairs a user class defines."""
    found = []
    names = {n for k in cls.__mro__ if k is not object for n in vars(k)}
    for f, g in _PAIRS:
        if f in names and g in names and callable(getattr(cls, f, None)) and callable(getattr(cls, g, None)):
            found.append((f, g))
    for n in names:
        for inv in (f"inverse_{n}", f"inv_{n}", f"{n}_inverse"):
            if inv in names and not n.startswith("_") and callable(getattr(cls, n, None)) \
                    and callable(getattr(cls, inv, None)) and (n, inv) not in found:
                found.append((n, inv))
    return found


def _user_class(obj: Any) -> bool:
    cls = type(obj)
    if isinstance(obj, (type, types.ModuleType, types.FunctionType)) or cls.__module__ == "builtins":
        return False
    return user_class(cls)


def _one_argument(fn: Any) -> bool:
    """Whether the bound method can be called with one positional argument."""
    try:
        inspect.signature(fn).bind(None)
    except (TypeError, ValueError):
        return False
    return True


def _as_tensor(v: Any) -> torch.Tensor | None:
    if isinstance(v, torch.Tensor) and (v.is_floating_point()):
        return v.detach()
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return torch.from_numpy(np.array(v, copy=True))
    return None


class RoundTripChecks(Check):
    name = "roundtrip"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}
        self.seen: set[int] = set()  # id(obj) already wrapped once
        self.wrapped: list[tuple[type, str, Any, Any]] = []  # (class, method, its own attribute, the wrapper)
        self.targets: dict[tuple[int, str], set[int]] = {}  # (id(class), method) -> ids of objects to probe
        self.user_classes: dict[type, list[tuple[str, str]]] = {}
        self.without: set[type] = set()  # the classes of user_classes with no pair
        self.wrapped_at: dict[tuple[int, str], int] = {}  # (id(class), method) -> the step it was wrapped at

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if info.forwards > EARLY:
            return
        n = self.looks.get(id(info), 0)
        if n >= LOOKS or len(self.seen) >= MAX_OBJECTS:
            return
        self.looks[id(info)] = n + 1
        objs: list[Any] = list(info.module.modules())
        for frame, outermost in user_frames(sys._getframe(1)):
            objs += list(frame.f_locals.values())
            if outermost:
                objs += list(frame.f_globals.values())
        without = self.without
        for obj in objs:
            cls = type(obj)
            if cls in without:  # (a class with no pair: passed over without a call)
                continue
            if id(obj) in self.seen or isinstance(obj, (torch.Tensor, np.ndarray)):
                continue
            pairs = self.user_classes.get(cls)
            if pairs is None:
                pairs = self.user_classes[cls] = _pairs_of(cls) if _user_class(obj) else []
            if not pairs:
                without.add(cls)
                continue
            self.seen.add(id(obj))
            for f, g in pairs:
                self._wrap(obj, f, g)
            if len(self.seen) >= MAX_OBJECTS:
                break

    def _wrap(self, obj: Any, f: str, g: str) -> None:
        """Wrap ``f`` on ``obj``'s class (never on the instance: a copy of the object must not call back
        into it) until ``obj``'s next call of it; other instances pass straight through."""
        cls = type(obj)
        if any(c is cls and n == f for c, n, _, _ in self.wrapped):
            self.targets[(id(cls), f)].add(id(obj))
            return
        try:
            if f in vars(obj):
                return  # an instance attribute of the user's: left alone
        except TypeError:
            pass
        own = cls.__dict__.get(f, _ABSENT)
        func = getattr(cls, f)
        if not isinstance(func, types.FunctionType):
            return  # a static or class method, a builtin: not a plain method
        check = self
        targets = self.targets.setdefault((id(cls), f), {id(obj)})

        def wrapper(this: Any, *args: Any, **kwargs: Any) -> Any:
            out = func(this, *args, **kwargs)
            if id(this) in targets:
                targets.discard(id(this))
                if not targets:
                    check._unwrap(cls, f)
                try:
                    check._probe(this, f, g, args, out)
                except Exception as exc:  # noqa: BLE001  a guard never breaks the user's call
                    check.s.check_failed(check, exc)
            return out

        try:
            setattr(cls, f, wrapper)
        except (AttributeError, TypeError):
            return
        self.wrapped.append((cls, f, own, wrapper))
        self.wrapped_at.setdefault((id(cls), f), self.s.step)

    def _unwrap(self, cls: type, f: str) -> None:
        for entry in [e for e in self.wrapped if e[0] is cls and e[1] == f]:
            self.wrapped.remove(entry)
            _, _, own, wrapper = entry
            if cls.__dict__.get(f) is wrapper:
                if own is _ABSENT:
                    delattr(cls, f)
                else:
                    setattr(cls, f, own)
        self.targets.pop((id(cls), f), None)
        self.wrapped_at.pop((id(cls), f), None)

    def _probe(self, obj: Any, f: str, g: str, args: tuple, out: Any) -> None:
        x = _as_tensor(args[0]) if args else None
        y = _as_tensor(out)
        if x is None or y is None or x.shape != y.shape or x.numel() < MIN_ELEMENTS:
            return
        inverse = getattr(obj, g)
        if not _one_argument(inverse):
            return
        state = dict(vars(obj))
        rng = torch.get_rng_state()
        try:
            with torch.no_grad():
                back = inverse(out.detach() if isinstance(out, torch.Tensor) else np.array(out, copy=True))
        except Exception:  # noqa: BLE001  an inverse that cannot take the output alone: nothing proved
            return
        finally:
            torch.set_rng_state(rng)
            current = vars(obj)
            for k in [k for k in current if k not in state]:
                del current[k]
            current.update(state)
        back_t = _as_tensor(back)
        if back_t is None or back_t.shape != x.shape:
            return
        with torch.no_grad():
            x64, b64, y64 = x.double().cpu(), back_t.double().cpu(), y.double().cpu()
            kept = (y64 != 0) & torch.isfinite(x64) & torch.isfinite(b64)
            n = int(kept.sum())
            if n < MIN_ELEMENTS:
                return
            xs = x64[kept]
            scale = xs.abs() + xs.std() + 1e-12
            bad = int(((b64[kept] - xs).abs() > TOL * scale).sum())
            worst = float(((b64[kept] - xs).abs() / scale).median())
        if bad < FAIL_SHARE * n:
            return
        cls = type(obj).__name__
        where = class_location(obj) or user_location(1) or cls
        self.s.report(
            "inverse-transform-not-inverse",
            f"{cls}.{g} does not undo {cls}.{f}: applied to {f}'s output on the data the program fed it, it "
            f"gives back the input on only {n - bad} of {n} elements (median error {worst:.3g} of their scale). "
            f"The model is trained in the space {f} makes, and whatever {g} puts back (forecasts, "
            "reconstructions, predictions in original units) is off by the statistics one side applies and the "
            "other does not, with no error.",
            fix=f"make {cls}.{g} the exact inverse of {cls}.{f}: every statistic {f} subtracts or divides by is "
            f"added or multiplied back by {g}, in reverse order, on the same axes (and each one {g} uses is "
            f"applied by {f}).",
            where=where, key=f"{cls}.{f}")

    def after_checked_step(self, oi: Any) -> None:
        if self.wrapped:  # a wrapped object that did not call its method within two steps is not waited for
            for cls, f, _, _ in list(self.wrapped):
                if self.s.step >= self.wrapped_at.get((id(cls), f), 0) + 2:
                    self._unwrap(cls, f)

    def remove_hooks(self) -> None:
        for cls, f, _, _ in list(self.wrapped):
            self._unwrap(cls, f)
