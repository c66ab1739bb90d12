"""Guard on a per-sample flip, rotation or roll whose default axes take in the batch (slug
``transform-over-batch-axis``, issue 33).

An invariant of per-sample transforms (augmentation, test-time augmentation): each sample is
transformed alone, over its own spatial or time axes.  Three of PyTorch's transforms name a
direction but act on fixed axes counted from the front, which are the axes of a single image or
matrix -- on a batch they take in the batch axis or the one after it:

- ``torch.fliplr(x)`` / ``x.fliplr()`` reverses axis 1: on a batch ``(N, H, W)`` the rows (an
  upside-down image, not its mirror image: libffcv/ffcv#213's test-time augmentation), on
  ``(N, C, H, W)`` the channels, on a sequence-first ``(T, N, F)`` the samples;
- ``torch.rot90(x)`` without ``dims`` rotates the plane of axes 0 and 1: the batch with the next;
- ``torch.roll(x, shifts)`` without ``dims`` rolls the flattened tensor: each sample's last values
  move into the next sample.

Seen with wrappers of ``torch.fliplr``, ``torch.rot90``, ``torch.roll`` and the tensor methods
of the same names, installed while a guard session is active: a call with the default axes on a
tensor of at least 4 axes or of 3 with axes 1 and 2 of one size (``fliplr``: a batch of square
images; a batch of sequences ``(N, T, F)`` is reversed in time along axis 1 on purpose) or of at
least 2 (``rot90``, ``roll``) notes its result (a weak
reference, the call site; the last :data:`KEPT` of them).  Reported when a noted result is the
first argument of a watched model's forward, on a checked training step or in evaluation: the
model's input is a batch, and its first axis -- the batch -- is among the transformed ones.
Silent for explicit axes (``x.flip(-1)``, ``torch.rot90(x, 1, (2, 3))``, ``torch.roll(x, 1, -1)``),
a single sample transformed before it is stacked into a batch, a result that is further computed
on before it reaches the model (``torch.cat``, mixing), and calls made while tracing under
``torch.compile``.
"""

from __future__ import annotations

import collections
import functools
import weakref
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

KEPT = 16
#: (weak reference to the result, the function, its call site, the input's shape) of recent calls
RECENT: collections.deque = collections.deque(maxlen=KEPT)
#: function -> the smallest rank at which its default axes take in a batch's first axis
FUNCS = {"fliplr": 3, "rot90": 2, "roll": 2}


def _defaults(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call leaves the axes to the function's default (``args`` after the tensor)."""
    if name == "fliplr":
        return True
    if name == "rot90":
        return len(args) < 2 and "dims" not in kwargs
    return len(args) < 2 and kwargs.get("dims") is None  # roll(x, shifts, dims=None)


def _note(name: str, x: Any, args: tuple, kwargs: dict, out: Any) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) or x.dim() < FUNCS[name]:
        return
    if name == "fliplr" and x.dim() == 3 and x.shape[1] != x.shape[2]:
        return  # (N, T, F) sequences reversed in time along axis 1 are meant; (N, H, W) square images are not
    if _defaults(name, args, kwargs):
        RECENT.append((weakref.ref(out), name, user_location(3), tuple(x.shape)))


def _wrapper(active: list, name: str, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def transform(x: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(x, *args, **kwargs)
        if active and not torch.compiler.is_compiling():
            try:
                _note(name, x, args, kwargs, out)
            except Exception:  # noqa: BLE001  never break the user's call over a check
                pass
        return out

    return transform


def install(patch: Callable, active: list) -> None:
    """Wrap ``torch.fliplr``, ``torch.rot90``, ``torch.roll`` and the tensor methods of the same names
    with ``patch(owner, name, make)``."""
    for name in FUNCS:
        if hasattr(torch, name):
            patch(torch, name, functools.partial(_wrapper, active, name))
        if hasattr(torch.Tensor, name):
            patch(torch.Tensor, name, functools.partial(_wrapper, active, name))


_WHAT = {
    "fliplr": ("reverses axis 1", "on a batch that is not the width: the rows of (N, H, W) images (an upside-down "
               "image instead of its mirror image), the channels of (N, C, H, W), the samples of a sequence-first "
               "batch", "x.flip(-1) (the width, whatever the layout)"),
    "rot90": ("rotates the plane of axes 0 and 1 when no dims are given", "on a batch that is the batch axis and the "
              "next one: samples are mixed with rows or channels", "torch.rot90(x, k, dims=(-2, -1))"),
    "roll": ("rolls the flattened tensor when no dims are given", "on a batch each sample's last values move into the "
             "next sample", "torch.roll(x, shifts, dims=-1) (the axis meant)"),
}


class TransformAxisChecks(Check):
    name = "axisflip"

    def __init__(self, session: Any):
        super().__init__(session)
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        self._look(info, args)

    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        self._look(info, args)

    def _look(self, info: ModelInfo, args: tuple) -> None:
        if not RECENT or not args or not isinstance(args[0], torch.Tensor):
            return
        x = args[0]
        for ref, name, loc, shape in RECENT:
            if ref() is x:
                break
        else:
            return
        key = loc or f"torch.{name}"
        if key in self.done or x.shape[0] < 2:
            return
        self.done.add(key)
        does, why, fix = _WHAT[name]
        where = f"torch.{name} call" + (f" at {loc}" if loc else "")
        self.s.report(
            "transform-over-batch-axis",
            f"the input of {info.name} is the result of torch.{name} at {loc or 'an unknown line'} on a tensor of "
            f"shape {list(shape)}, a batch: torch.{name} {does}, which is a per-sample transform's axis only for a "
            f"single image or matrix; {why}. Every sample is transformed wrongly (or mixed with others) and the "
            "model is trained or evaluated on inputs it was never meant to see, with no error.",
            fix=f"name the axes of one sample from the end: {fix}.", where=where, key=key)
