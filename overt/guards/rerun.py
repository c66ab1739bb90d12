"""The one way a probe runs the user's code again (a second forward of a model, a method called on a few rows).

A probe's extra calls are no step's and change nothing the program reads afterwards: :func:`rerun` saves what
such a call may change and puts it back when the probe ends (the model's buffers and module attributes, every
global random generator), takes the loss-function instrumentation off for its length (no session counts the
probe's loss calls as the program's), hushes the process-wide wrappers (no check reports what the probe's own
calls did: a ``log_softmax`` inside the re-run forward is not the user's evaluation code), and lets the axes
window see the calls as user code (:func:`overt.guards.aside.user_code`).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

from overt.guards import patches
from overt.guards.aside import user_code
from overt.guards.putback import ModelState, RandomState
from overt.guards.swapped import hushed


@contextlib.contextmanager
def rerun(root: nn.Module | None, device: torch.device | None) -> Iterator[ModelState | None]:
    """Run user code again inside: yields the saved state of ``root`` (None without a module), restored on exit
    with torch's CPU generator, ``device``'s CUDA generator, Python's and NumPy's."""
    saved = ModelState(root, device) if root is not None else None
    random = RandomState([device] if device is not None else [])
    sessions = list(patches.ACTIVE)
    patches.ACTIVE.clear()
    try:
        with user_code(), hushed():
            yield saved
    finally:
        patches.ACTIVE[:] = sessions
        if saved is not None:
            saved.restore()
        random.restore()
