"""Stale snapshots of a running function's local variables, left by reading ``frame.f_locals``.

Before Python 3.13 (PEP 667), reading ``f_locals`` of a function that is still running (``locals()``,
``"...".format(**locals())``, a debugger, and guards that look at the user's frames to name a variable or
find a module on the stack) copies the function's local variables into a dict that the frame keeps until
it returns, refreshed only at the next read.  A value the function has since let go of (a loop variable
assigned again) stays alive in that dict: a reference the program no longer holds, and at most one
per variable, so no memory grows.  :func:`refresh_stack` reads the frames on the stack again, so that
each snapshot holds only what its variables hold now.  Reading is all it does: the variables themselves
are untouched."""

from __future__ import annotations

import sys
from types import FrameType

#: from 3.13 on ``f_locals`` of a function's frame is a live view: no snapshot is kept
KEEPS_SNAPSHOTS = sys.version_info < (3, 13)


def refresh_stack(start: FrameType | None) -> None:
    """Refresh the locals snapshot of ``start`` and of every frame that called it (no-op on 3.13+)."""
    if not KEEPS_SNAPSHOTS:
        return
    frame = start
    while frame is not None:
        try:
            frame.f_locals  # noqa: B018  (the read re-syncs the frame's snapshot dict with its variables)
        except Exception:  # never break training over a frame that cannot be read
            pass
        frame = frame.f_back
