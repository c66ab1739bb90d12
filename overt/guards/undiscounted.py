"""Whether a return function's discount can only be 1 (for ``targets-off-recursion``; issue 33, session 56).

A return, advantage or value-target function that takes no discount argument and reads no discount global may
still compute undiscounted returns (gamma = 1, as REINFORCE++ and most token-level RLHF returns do): the
recursion then fixes its output as well.  This module says when no discount *can* hide in the function's code:
no float constant strictly between 0 and 1 (a literal 0.99), no attribute or global named like a discount
(``cfg.gamma``, ``DISCOUNT``), no global scalar or array holding a value strictly between 0 and 1 (``G = 0.99``,
a vector of per-step discounts), no closure, and no call into another function or class of the script (a helper
that may hold the discount).  When any of these is in doubt, the answer is no and the check stays silent.
"""

from __future__ import annotations

import builtins
import dis
import types
from typing import Any, Callable, Iterator

import numpy as np
import torch

#: fragments of a name that may hold a discount (a global, an attribute of a config, a closure cell)
_DISCOUNT_PARTS = ("gamma", "discount", "disc", "gam")
_BIG = 1_000_000


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _fraction(x: Any) -> bool:
    """True when ``x`` is a number, or holds one, strictly between 0 and 1 (or cannot be read)."""
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, np.integer)):
        return False
    if isinstance(x, (float, np.floating)):
        return 0.0 < abs(float(x)) < 1.0
    if isinstance(x, torch.Tensor):
        if x.numel() > _BIG or x.is_complex():
            return True
        if not x.is_floating_point():
            return False
        a = x.detach().abs()
        return bool(((a > 0) & (a < 1)).any())
    if isinstance(x, np.ndarray):
        if x.size > _BIG or x.dtype.kind not in "biuf":
            return True
        if x.dtype.kind != "f":
            return False
        a = np.abs(x)
        return bool(((a > 0) & (a < 1)).any())
    return True


def _harmless_global(value: Any, module: str | None) -> bool:
    """A global the function may read without it carrying a discount."""
    if isinstance(value, types.ModuleType) or value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, (types.FunctionType, type)):
        return getattr(value, "__module__", None) != module  # the script's own helpers may hold the discount
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)) or callable(value) \
            and getattr(value, "__module__", None) not in (None, module) \
            and not isinstance(value, (torch.Tensor, np.ndarray)):
        return True  # a library function (torch.zeros, np.cumsum)
    return not _fraction(value)


def no_discount_possible(fn: Callable) -> bool:
    """True when ``fn``'s own code cannot apply a discount other than 1 (see the module's docstring)."""
    code = getattr(fn, "__code__", None)
    if code is None or getattr(fn, "__closure__", None):
        return False
    glob = getattr(fn, "__globals__", {})
    module = getattr(fn, "__module__", None)
    for c in _codes(code):
        if c.co_freevars:
            return False
        if any(isinstance(k, (float, complex)) and not isinstance(k, bool) and _fraction(abs(k)) for k in c.co_consts):
            return False
        for ins in dis.get_instructions(c):
            name = ins.argval if isinstance(ins.argval, str) else None
            if name is None:
                continue
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF",
                              "LOAD_CLASSDEREF") and any(p in name.lower() for p in _DISCOUNT_PARTS):
                return False
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                if name in glob:
                    if not _harmless_global(glob[name], module):
                        return False
                elif not hasattr(builtins, name):
                    return False  # a name we cannot resolve
    return True
