"""Guard on a module whose returned lengths do not fit the tensor they describe (slug
``lengths-do-not-fit-output``; issue 33, the wild corpus's w246).

An invariant of every module that takes a padded batch with its lengths and returns a transformed batch with new
lengths (a subsampling front end, a pooling or striding encoder, a tokenizer-side packer): an item that fills the
input's time axis fills the output's.  The padded batch is padded to its longest member, and the output-size
formula of the layers that shrank the axis maps the full input size to the full output size, so the full items'
new length is the size of one of the output's axes.  Lengths transformed twice (openspeech-team/openspeech#76:
the convolutions already returned the subsampled lengths and the module shifts them right by two again), by the
wrong stride, or off by one describe a tensor the module did not produce: the CTC loss, the packing, the masks
and the pooling downstream read only part of every item (or past it), with no error.

What is proved, on a watched model's first checked training forwards (2 of them, among its first 8), nothing on
any other step: the model's modules whose ``forward`` has a parameter named for lengths (``lengths``, ``lens``,
``input_lengths``, ``seq_len`` ...) get a one-shot forward hook.  A call that receives a floating batch ``x``
(batch first) with a 1-D integer tensor of one length per item, and returns a floating tensor ``y`` of the same
batch size with one 1-D integer tensor of new lengths, is read on the device (with the next checked step): for
each axis of ``x``, whether the longest length is that axis's size and which new lengths the items of exactly
that length got.  Reported when exactly one axis of ``x`` is padded to the longest item, those items all got one
new length, and no axis of ``y`` has that size.  Silent: batches padded to a fixed size (no item fills it), an
input whose time size is shared by another axis, outputs whose lengths match an axis (a correct formula, any
layout), lengths given as lists, several integer tensors returned, lengths passed on unchanged from an inner
module (judged at the inner module).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.where import class_location

EARLY = 8  # a model is looked at among its first forwards (counted from when it is watched)
LOOKS = 2  # checked forwards looked at per model
MAX_MODULES = 16
_LENGTH_NAME = re.compile(r"(^|_)(len|lens|length|lengths|seq_len|seq_lens|seqlen|seqlens)(_|$)")


def _length_param(cls: type) -> str | None:
    try:
        params = inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):
        return None
    names = [n for n in params if n != "self" and _LENGTH_NAME.search(n.lower())]
    return names[0] if len(names) == 1 else None


def _ints(t: Any, batch: int) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 1 and t.shape[0] == batch and not t.is_floating_point() \
        and not t.is_complex() and t.dtype != torch.bool


class LengthChecks(Check):
    name = "lengths"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}
        self.params: dict[type, str | None] = {}
        self.handles: list[Any] = []
        self.done: set[str] = set()
        self.returned: set[int] = set()  # ids of the lengths tensors modules returned in the forward looked at

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        key = id(info.module)
        if info.forwards > EARLY or self.looks.get(key, 0) >= LOOKS:
            return
        self.looks[key] = self.looks.get(key, 0) + 1
        self.remove_hooks()
        n = 0
        for m in info.module.modules():
            cls = type(m)
            if cls not in self.params:
                self.params[cls] = _length_param(cls) if cls.__module__.split(".")[0] != "torch" else None
            param = self.params[cls]
            if param is None:
                continue
            self.handles.append(m.register_forward_hook(self._hook(m, param), with_kwargs=True))
            n += 1
            if n >= MAX_MODULES:
                break

    def on_forward_end(self, info: Any, output: Any, failed: bool) -> None:
        if self.handles:
            self.remove_hooks()

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        self.returned = set()

    def _hook(self, m: nn.Module, param: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            try:
                self._look(m, param, args, kwargs, output)
            except Exception as exc:  # noqa: BLE001  a guard never breaks the user's forward
                self.s.check_failed(self, exc)
        return hook

    def _look(self, m: nn.Module, param: str, args: tuple, kwargs: dict, output: Any) -> None:
        if not torch.is_grad_enabled() or not m.training:
            return
        try:
            bound = inspect.signature(m.forward).bind(*args, **kwargs)
        except TypeError:
            return
        lengths = bound.arguments.get(param)
        x = next((a for a in list(args) + list(kwargs.values())
                  if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dim() >= 2), None)
        if x is None or not _ints(lengths, x.shape[0]):
            return
        outs = list(output) if isinstance(output, (tuple, list)) else []
        ys = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point() and o.dim() >= 2
              and o.shape[0] == x.shape[0]]
        new = [o for o in outs if _ints(o, x.shape[0])]
        if not ys or len(new) != 1:
            return
        if id(new[0]) in self.returned:  # passed on from an inner module (its hook ran first): judged there
            return
        self.returned.add(id(new[0]))
        where = class_location(m) or type(m).__name__
        if where in self.done:
            return
        y, out_lengths = ys[0], new[0].detach()
        lengths = lengths.detach().to(out_lengths.device)
        longest = lengths.max()
        rows = []
        for a in range(1, x.dim()):
            full = lengths == x.shape[a]
            rows.append(torch.stack([(longest == x.shape[a]).to(torch.int64), full.sum().to(torch.int64),
                                     torch.where(full, out_lengths, out_lengths.new_full((), 1 << 40)).min().to(torch.int64),
                                     torch.where(full, out_lengths, out_lengths.new_full((), -1)).max().to(torch.int64)]))
        self.s.defer(torch.stack(rows).flatten(), self._judge(m, where, tuple(x.shape), tuple(y.shape)))

    def _judge(self, m: nn.Module, where: str, xs: tuple, ys: tuple):
        name = type(m).__name__

        def callback(vals: list[float]) -> None:
            if where in self.done:
                return
            rows = [vals[i:i + 4] for i in range(0, len(vals), 4)]
            axes = [(a + 1, r) for a, r in enumerate(rows) if r[0] and r[1] > 0]
            if len(axes) != 1:
                return
            axis, (_, count, lo, hi) = axes[0]
            if sum(1 for s in xs[1:] if s == xs[axis]) != 1 or lo != hi or lo < 0:
                return
            v = int(lo)
            if v in ys[1:]:
                return
            self.done.add(where)
            self.s.report(
                "lengths-do-not-fit-output",
                f"{name}.forward (class at {where}) takes a batch {list(xs)} padded along axis {axis} to its longest "
                f"item ({xs[axis]}) with its lengths, and returns a tensor {list(ys)} with new lengths, but the "
                f"{int(count)} item(s) that fill the input come out with length {v}, which is the size of no axis of "
                "the output. An item that fills its input fills its output (the layers' output-size formula maps the "
                "full size to the output's size): these lengths were transformed again, by another stride, or off "
                "by one, so the loss, masks or pooling that read them cover only part of every item (or run past "
                "it), with no error.",
                fix="return the lengths the layers actually produce (the output-size formula applied once per "
                "shrinking layer, (L + 2*padding - kernel) // stride + 1), and do not transform lengths a helper "
                "already returned transformed",
                where=f"{name}.forward (class at {where})", key=where)

        return callback
