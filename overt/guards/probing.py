"""Whether a check is running a backward of its own (issue 33).

A check that backwards a step's graph once more to measure something (:mod:`overt.guards.deadterm`: each
term of the loss alone) runs every hook on that graph again: the hooks the guards placed on the step's
outputs see gradients that are not the step's.  Those hooks return at once while :data:`ACTIVE` is set.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

#: a check's own backward is running: the guards' gradient hooks ignore what they see
ACTIVE = False


@contextlib.contextmanager
def active() -> Iterator[None]:
    global ACTIVE
    before = ACTIVE
    ACTIVE = True
    try:
        yield
    finally:
        ACTIVE = before
