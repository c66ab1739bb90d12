"""Process-wide wrappers of torch functions and tensor methods, in place only while a check listens.

The checks that look at what is done to a model's evaluation outputs (:mod:`overt.guards.softmax_dim`,
:mod:`overt.guards.predshape`) wrap a few of torch's functions (``torch.softmax``, ``Tensor.__eq__``...)
for a window (an evaluation, a checked step) and put the originals back after it: one set of wrappers per
module for the whole process, installed when the first check starts listening and removed when the last
one stops.  An inherited method (``torch.Tensor``'s come from its C base) is deleted again, not set.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch

#: whether torch.compile is tracing this call: a wrapper then steps aside (PyTorch's own call, no graph break)
compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


class Swapped:
    """The wrappers of ``targets`` (``(owner, name)`` pairs), made by ``make(orig, owner, name)``."""

    def __init__(self, targets: Iterable[tuple[Any, str]], make: Callable[[Any, Any, str], Any]):
        self.targets = tuple(targets)
        self.make = make
        self.listening: list[Any] = []  # the checks the wrappers call, in the order they started listening
        self.saved: dict[tuple[Any, str], Any] = {}  # (owner, name) -> the original (None: inherited)

    def listen(self, check: Any) -> None:
        if check not in self.listening:
            self.listening.append(check)
            self._install()

    def stop(self, check: Any) -> None:
        if check in self.listening:
            self.listening.remove(check)
            if not self.listening:
                self._uninstall()

    def _install(self) -> None:
        if self.saved:
            return
        for owner, name in self.targets:
            orig = getattr(owner, name, None)
            if orig is not None:
                self.saved[(owner, name)] = orig if name in vars(owner) else None
                setattr(owner, name, self.make(orig, owner, name))

    def _uninstall(self) -> None:
        for (owner, name), orig in self.saved.items():
            if orig is None:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)
        self.saved.clear()
