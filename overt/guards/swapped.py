"""Process-wide wrappers of torch functions and tensor methods, in place only while a check listens.

The checks that look at what is done to a model's evaluation outputs (:mod:`overt.guards.softmax_dim`,
:mod:`overt.guards.predshape`) wrap a few of torch's functions (``torch.softmax``, ``Tensor.__eq__``...)
for a window (an evaluation, a checked step) and put the originals back after it: one set of wrappers per
module for the whole process, installed when the first check starts listening and removed when the last
one stops.  An inherited method (``torch.Tensor``'s come from its C base) is deleted again, not set.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

import torch

#: whether torch.compile is tracing this call: a wrapper then steps aside (PyTorch's own call, no graph break)
compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


#: every set of wrappers made, so that a probe can hush them all (:func:`hushed`)
_ALL: list["Swapped"] = []


@contextlib.contextmanager
def hushed() -> Iterator[None]:
    """No check hears the wrapped calls made inside: a probe that runs the user's forward again (a second
    forward no step made) must not be seen as the program's own (the wrappers stay in place, with no listener)."""
    saved = [(w, w.listening[:]) for w in _ALL if w.listening]
    for w, _ in saved:
        w.listening.clear()
    try:
        yield
    finally:
        for w, listening in saved:
            w.listening[:] = listening + [c for c in w.listening if c not in listening]


class Swapped:
    """The wrappers of ``targets`` (``(owner, name)`` pairs), made by ``make(orig, owner, name)``."""

    def __init__(self, targets: Iterable[tuple[Any, str]], make: Callable[[Any, Any, str], Any]):
        _ALL.append(self)
        self.targets = tuple(targets)
        self.make = make
        self.listening: list[Any] = []  # the checks the wrappers call, in the order they started listening
        self.saved: dict[tuple[Any, str], Any] = {}  # (owner, name) -> the original (None: inherited)
        # (owner, name) -> (original, its wrapper): made once and reused while the original is the same
        # object (a window opens at every checked step: no functools.wraps each time)
        self.made: dict[tuple[Any, str], tuple[Any, Any]] = {}

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
                made = self.made.get((owner, name))
                if made is None or made[0] is not orig:
                    made = self.made[(owner, name)] = (orig, self.make(orig, owner, name))
                setattr(owner, name, made[1])

    def _uninstall(self) -> None:
        for (owner, name), orig in self.saved.items():
            if orig is None:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)
        self.saved.clear()


def batched_outputs(args: tuple, output: Any) -> list[torch.Tensor]:
    """The tensors among a forward's outputs (the output itself, or the first four of a tuple/list)
    that are batched like its first input: at least 2-D, the same first dimension, 2 samples or more."""
    x = next((a for a in args if isinstance(a, torch.Tensor) and a.dim()), None)
    if x is None:
        return []
    outs = [output] if isinstance(output, torch.Tensor) else \
        [t for t in output[:4] if isinstance(t, torch.Tensor)] if isinstance(output, (tuple, list)) else []
    return [t for t in outs if t.dim() >= 2 and t.shape[0] == x.shape[0] and t.shape[0] >= 2]


class EvalOutputLooks:
    """What both checks of this kind share: each watched model's first ``OUT_LOOKS`` evaluation
    forwards get a one-shot hook that remembers their outputs (the check's ``_remember(info)``), and a
    model switched to eval mode puts the check's wrappers in place while some model has looks left.
    A class using it sets ``OUT_LOOKS`` and has ``s``, ``out_looks``, ``out_hook``, ``_wrap`` and
    ``_remember``."""

    OUT_LOOKS: int
    s: Any
    out_looks: dict[int, int]  # id(ModelInfo) -> evaluation forwards whose outputs were remembered
    out_hook: Any  # a OneShotHook

    def on_eval_forward(self, info: Any, args: tuple) -> None:
        self._eval(info)

    def on_no_grad_forward(self, info: Any) -> None:
        self._eval(info)

    def eval_looks_left(self, info: Any) -> bool:
        return self.out_looks.get(id(info), 0) < self.OUT_LOOKS

    def eval_started(self) -> None:
        """A watched model was switched to eval mode (from the patched ``Module.train``): an
        evaluation begins, wrapped from its first call."""
        if any(self.out_looks.get(id(m), 0) < self.OUT_LOOKS for m in self.s.models.values()):
            self._wrap()  # type: ignore[attr-defined]

    def _eval(self, info: Any) -> None:
        self.out_hook.clear_stale()
        if info.module.training or self.out_hook.pending:
            return
        n = self.out_looks.get(id(info), 0)
        if n >= self.OUT_LOOKS:
            self._looked_enough()
            return
        self.out_looks[id(info)] = n + 1
        self.out_hook.place(info.module, self._remember(info))  # type: ignore[attr-defined]

    def _looked_enough(self) -> None:
        """An evaluation forward of a model whose looks are all spent."""
