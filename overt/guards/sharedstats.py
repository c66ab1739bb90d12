"""Guard on fitted transforms that share one statistics object by accident (slug ``transform-statistics-shared``,
issue 33).

An invariant of correct training: a fitted transform (a scaler, a normaliser, an encoder with ``fit`` or
``fit_transform``) keeps the statistics of the data it was fitted on.  Two transforms that hold one and the same
statistics object do not: fitting the second writes its statistics into the first, and every later
``transform``/``inverse_transform`` of the first puts its data into the second's units (unit8co/darts#314: a
``Scaler.__init__(self, stats=RangeStats())`` default argument is evaluated once, so every scaler built with no
argument shares it).

Seen on the program's own objects, whatever its code's form: on checked training forwards, when the running
script's namespace (``__main__``) grew since the last look, its values that are instances of a script-defined class
with a ``fit``/``fit_transform``/``partial_fit`` method are grouped by the objects their attributes hold; an
attribute object held by two instances or more that is a default argument of the class's ``__init__`` (so no caller
chose to share it) and holds fitted state (tensors, arrays or numbers among its attributes or items) is reported
once, at the ``__init__`` line.  Silent on statistics pooled by design (an object the program passes to each
transform explicitly is no default), on one instance, on defaults that hold no fitted values (a configuration
object, an immutable default) and on classes without a ``fit`` method.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from overt.guards.check import Check
from overt.guards.scriptspace import script_grown
from overt.guards.where import short_location

FIT = ("fit", "fit_transform", "partial_fit")
LOOKS = 3  # namespace changes looked at


def _fitted_values(holder: Any) -> list[str]:
    """Names of the fitted values ``holder`` keeps (attributes or dict items that are tensors, arrays or numbers)."""
    if isinstance(holder, dict):
        items = holder.items()
    else:
        items = getattr(holder, "__dict__", {}).items()
    return [str(k) for k, v in items
            if isinstance(v, (torch.Tensor, np.ndarray)) or (isinstance(v, numbers.Number) and not isinstance(v, bool))]


def _defaults(cls: type) -> dict[int, str]:
    """``id(value) -> parameter name`` of the default arguments of ``cls.__init__``."""
    init = getattr(cls, "__init__", None)
    code = getattr(init, "__code__", None)
    if code is None:
        return {}
    out: dict[int, str] = {}
    defaults = init.__defaults__ or ()
    names = code.co_varnames[:code.co_argcount]
    for name, value in zip(names[len(names) - len(defaults):], defaults):
        out[id(value)] = name
    for name, value in (init.__kwdefaults__ or {}).items():
        out[id(value)] = name
    return out


class SharedStatsChecks(Check):
    name = "sharedstats"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seen = -1
        self.looks = 0
        self.namespace: dict | None = None
        self.done: set[int] = set()

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        if self.looks >= LOOKS:
            return
        grown = script_grown(self.namespace, self.seen)
        if grown is None:
            return
        self.namespace, _ = grown
        self.seen = len(self.namespace)
        self.looks += 1
        self._look(dict(self.namespace))

    def _look(self, namespace: dict) -> None:
        by_class: dict[type, list[tuple[str, Any]]] = {}
        for name, value in namespace.items():
            cls = type(value)
            if getattr(cls, "__module__", None) != "__main__" or isinstance(value, (type, torch.nn.Module)):
                continue
            if not any(callable(getattr(cls, m, None)) for m in FIT):
                continue
            group = by_class.setdefault(cls, [])
            if all(v is not value for _, v in group):
                group.append((name, value))
        for cls, group in by_class.items():
            if len(group) < 2:
                continue
            defaults = _defaults(cls)
            if not defaults:
                continue
            holders: dict[int, list[tuple[str, str, Any]]] = {}
            for name, inst in group:
                for attr, value in getattr(inst, "__dict__", {}).items():
                    if id(value) in defaults:
                        holders.setdefault(id(value), []).append((name, attr, value))
            for key, held in holders.items():
                if len(held) < 2 or key in self.done:
                    continue
                fitted = _fitted_values(held[0][2])
                if not fitted:
                    continue
                self.done.add(key)
                self._report(cls, defaults[key], held, fitted)

    def _report(self, cls: type, param: str, held: list[tuple[str, str, Any]], fitted: list[str]) -> None:
        code = cls.__init__.__code__
        loc = short_location(code.co_filename, code.co_firstlineno)
        names = ", ".join(f"{n}.{a}" for n, a, _ in held)
        kind = type(held[0][2]).__name__
        self.s.report(
            "transform-statistics-shared",
            f"the {len(held)} {cls.__name__} objects {', '.join(n for n, _, _ in held)} hold one and the same "
            f"{kind} object ({names}): the default argument `{param}` of {cls.__name__}.__init__ at {loc}, "
            f"evaluated once when the function was defined, so every {cls.__name__} built without it shares it. "
            f"It keeps the fitted statistics ({', '.join(fitted[:4])}) of whichever was fitted last: fitting one "
            "overwrites the others', and each other transform or inverse_transform then puts its data into the last "
            "fitted data's units, with no error.",
            fix=f"default `{param}` to None and build a new {kind}() per object in __init__ "
            f"(self.{held[0][1]} = {param} if {param} is not None else {kind}()); pass one object explicitly where "
            "statistics are meant to be pooled.",
            where=f"{cls.__name__}.__init__ at {loc}", key=f"{cls.__qualname__}.{param}")
