"""Runtime guards: the catalog's silent training failures, made loud while the program runs.

Three ways in, one set of checks (:class:`~overt.guards.session.GuardSession`):

- ``overt.guard(model, optimizer)`` in a hand-written loop (:func:`guard`);
- ``overt run script.py`` for an unmodified script (:mod:`overt.guards.run_cli`);
- :class:`overt.guards.engine.GuardCallback` in overt's engine (on by default).

See docs/guards.md for every guard: the bug, an example, the message, the fix.
Names are imported lazily, so ``overt run --help`` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "guard": "overt.guards.api",
    "Guard": "overt.guards.api",
    "GuardError": "overt.guards.report",
    "GuardOptions": "overt.guards.options",
    "GuardSession": "overt.guards.session",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'overt.guards' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
