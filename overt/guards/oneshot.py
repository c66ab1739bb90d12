"""A forward hook placed for one forward of a watched model, removed when that forward ends.

PyTorch iterates a module's live hook dict while it calls the hooks, so a hook that removes
itself while a forward is unwinding from an exception would cut the hooks after it off: such a
handle is kept and removed at the next placement (or at the end).  Used by the checks that look
at one evaluation forward (:mod:`overt.guards.independence`, :mod:`overt.guards.skew`).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from overt.guards import aside


class OneShotHook:
    """At most one pending hook; :meth:`place` it, :meth:`fired` in it, :meth:`remove` at the end."""

    def __init__(self) -> None:
        self.handle: Any = None
        self.stale: list[Any] = []

    @property
    def pending(self) -> bool:
        return self.handle is not None

    def clear_stale(self) -> None:
        while self.stale:
            self.stale.pop().remove()

    def place(self, module: Any, hook: Callable[..., Any], **kwargs: Any) -> None:
        self.clear_stale()
        # the axes window's mode stands aside while it runs (the guards' own code: overt/guards/aside.py)
        if aside.WINDOW is not None or aside.EARLY:
            hook = aside.hook(hook)
        self.handle = module.register_forward_hook(hook, always_call=True, **kwargs)

    def fired(self) -> bool:
        """Called first in the hook: removes it; False when the forward raised (look at nothing)."""
        handle, self.handle = self.handle, None
        if handle is None:
            return False
        if sys.exc_info()[1] is not None:
            self.stale.append(handle)
            return False
        handle.remove()
        return True

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        self.clear_stale()
