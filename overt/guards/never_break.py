"""How the guards' own hooks run inside the user's training: they never break it, and
torch.compile does not trace into them."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import torch

from overt.guards import aside
from overt.guards.report import GuardError

_DISABLED: dict[Callable[..., Any], Callable[..., Any]] = {}


def compiler_disable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Keep torch.compile from tracing into a hook (it runs eagerly, between graphs).
    ``torch.compiler.disable`` imports torch._dynamo (sympy, torch.distributed...: seconds of
    start-up), so it is applied on the first call made once torch._dynamo is imported: a
    program that never imported it cannot be compiling."""

    @functools.wraps(fn)
    def hook(*args: Any) -> Any:
        if "torch._dynamo" not in sys.modules:
            return fn(*args)
        disabled = _DISABLED.get(fn)
        if disabled is None:
            disabled = _DISABLED[fn] = torch.compiler.disable(fn)
        return disabled(*args)

    return hook


def never_break(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The session's own hooks follow the checks' policy: a failure is reported once and
    the hook returns (a :class:`GuardError` that stops the run on purpose passes through).
    While the axes window is open its function mode stands aside (:mod:`overt.guards.aside`)."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any) -> Any:
        mode = aside.WINDOW  # the axes window's function mode stands aside while the hook runs
        token = aside.step_aside(mode) if mode is not None else None
        try:
            return fn(self, *args)
        except GuardError:
            raise
        except Exception as exc:
            self.check_failed(f"{type(self).__name__}.{fn.__name__}", exc)
            return None
        finally:
            if token is not None:
                aside.back(token)
            if aside.WINDOW is not mode:  # a window opened in this hook: its mode goes on the stack now
                aside.release(mode)

    return wrapper
