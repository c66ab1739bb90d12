"""The discount a line of the user's code reads (issue 33, session 52): for the checks whose premise holds only
where a program declares a discount below 1 (:mod:`overt.guards.bootshift`, :mod:`overt.guards.tdgrad`).

A name of the code itself (a local or a global: ``gamma``, ``GAMMA``, ``discount`` ...) or an attribute, under one
of those names, of an object the code holds (``self.gamma``, ``args.gamma``, ``cfg.discount``).  Only plain
numbers count; a name the code does not mention is not looked up (a learning-rate decay called ``gamma`` in
another function is not this line's discount).
"""

from __future__ import annotations

from typing import Any

from overt.guards.where import user_frame  # noqa: F401  (re-exported: bootshift, tdgrad)

NAMES = ("gamma", "discount", "discount_factor", "gamma_", "disc", "discount_rate")
HOLDERS = ("self", "args", "cfg", "config", "hparams", "params", "opt", "opts", "hp", "flags", "agent")


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def discount_at(frame: Any) -> tuple[str, float] | None:
    """(name, value) of a discount that the code of ``frame`` reads, else None."""
    code = frame.f_code
    names = set(code.co_names) | set(code.co_varnames)
    for n in NAMES:
        for cand in (n, n.upper()):
            if cand in names:
                for scope in (frame.f_locals, frame.f_globals):
                    v = _number(scope.get(cand))
                    if v is not None:
                        return cand, v
    for holder in HOLDERS:
        if holder not in names:
            continue
        obj = frame.f_locals.get(holder)
        if obj is None and holder != "self":
            obj = frame.f_globals.get(holder)
        if obj is None:
            continue
        for n in NAMES:
            if n in names:
                v = _number(getattr(obj, n, None))
                if v is not None:
                    return f"{holder}.{n}", v
    return None
