"""Guard on a weight quantiser whose grid covers one sign only (slug ``pruning-removes-one-sign``, widened from the
stored weights to the weights a forward computes from them; issue 33, the wild corpus's w351).

The invariant is :mod:`overt.guards.prunesign`'s: no rule that keeps or drops weights depends on a weight's sign
(a sign is a convention of the layer: negating a unit's incoming and outgoing weights changes nothing), so where a
trained weight has both signs, what is kept of it has both signs too.  A fake quantiser in quantisation-aware
training is such a rule, applied in every forward instead of once to the stored weight: it rounds the weight to a
grid of levels over the range it is calibrated for, and a correct grid covers that range, both signs (a symmetric
signed grid, or an asymmetric one whose zero point sits at ``-min/scale``).  An asymmetric integer range
``0..255`` whose zero point is left at 0 covers only ``[0, 255 * scale]``: every negative weight is clamped to the
level 0, the stored weight keeps its signs while the layer computes with a weight that has lost one of them.

What is proven, once per model, on its first checked training forward after the warm-up (no work on any other
step): every module of the model whose class is not PyTorch's own (up to :data:`MAX_MODULES`; torch's fake quantisers
compute their zero points from the observed range) is hooked for that forward, and a call whose first
argument is a trainable parameter of two or more dimensions and whose output has its shape is a weight transform.
Its sign counts (input and output), exact zeros, the extremes of the output and the number of distinct output
values are read with the next checked step (one deferred read).  Judged only when the output is quantised (at most
:data:`MAX_LEVELS` distinct values, and fewer than half the elements: a continuous reparametrisation such as
``relu(v)`` for weights kept non-negative by design is not judged) and the input has at least
:data:`prunesign.MIN_NEGATIVE` of each sign; reported when at least :data:`prunesign.MIN_ZEROS` of the output is
exactly zero and its non-zero levels lie on one side of zero (the smaller extreme below :data:`prunesign.ONE_SIDE`
of the larger).  A correct quantiser (symmetric or with its zero point set) keeps both signs; a ternary or
low-bit one keeps many zeros and both signs; an activation quantiser is never called on a parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules.module import register_module_module_registration_hook

from overt.guards import prunesign
from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MAX_MODULES = 512  # modules hooked for the one forward looked at
MAX_WEIGHTS = 64  # weight transforms read
MAX_LEVELS = 257  # distinct output values of a quantiser (8 bits and a zero)
MAX_LOOKS = 8  # forwards looked at per run: the first checked one after the warm-up, then after a module assignment


class QuantSignChecks(Check):
    name = "quantsign"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looked: set[int] = set()  # id(model info) looked at since the last module was assigned anywhere
        self.looks = 0
        # a module assigned as another's attribute (a quantiser attached after float training) calls this, once,
        # when it happens: no work on the steps
        self.assigned = register_module_module_registration_hook(self._assigned)
        self.handles: list[Any] = []
        self.model: ModelInfo | None = None
        self.seen: set[tuple[int, int]] = set()  # (id(module), id(parameter)) already read

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.handles or self.looks >= MAX_LOOKS or self.s.step < self.s.options.warmup_steps:
            return
        if id(info) in self.looked:
            return  # looked at already, and no module was added or swapped in since (a quantiser attached later)
        self.looked.add(id(info))
        self.looks += 1
        mods = [m for m in info.module.modules() if not type(m).__module__.startswith("torch.")]
        self.model = info
        for m in mods[:MAX_MODULES]:
            self.handles.append(m.register_forward_hook(self._record(info)))

    def _assigned(self, module: nn.Module, name: str, submodule: Any) -> None:
        self.looked.clear()

    def _record(self, info: ModelInfo):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            w = args[0] if args else None
            if not isinstance(w, nn.Parameter) or not w.requires_grad or w.dim() < 2 \
                    or w.numel() < prunesign.MIN_SURVIVORS or not w.is_floating_point() \
                    or (id(module), id(w)) in self.seen:
                return
            if not isinstance(output, torch.Tensor) or output is w or output.shape != w.shape \
                    or not output.is_floating_point():
                return
            if len(self.seen) >= MAX_WEIGHTS or not torch.is_grad_enabled():
                return
            self.seen.add((id(module), id(w)))
            self._read(info, module, w, output.detach())
        return hook

    def _read(self, info: ModelInfo, module: nn.Module, w: torch.Tensor, q: torch.Tensor) -> None:
        name = self.s.name_of(w)
        path = next((n for n, m in info.module.named_modules() if m is module), "")
        label = f"{info.name}.{path} ({type(module).__name__})" if path else type(module).__name__
        with torch.no_grad():
            w, q = w.detach().flatten(), q.flatten()
            s = q.sort().values
            levels = (s[1:] != s[:-1]).sum() + 1
            big = torch.finfo(q.dtype).max  # the non-zero values' extremes, with no data-dependent shape
            lo = torch.where(q != 0, q, torch.full_like(q, big)).amin()
            hi = torch.where(q != 0, q, torch.full_like(q, -big)).amax()
            vals = torch.stack([(w < 0).sum(), (w > 0).sum(), (q == 0).sum(), levels]).to(torch.float64)
            vals = torch.cat([vals, torch.stack([lo, hi]).to(torch.float64)])
        code = getattr(getattr(type(module), "forward", None), "__code__", None)
        line = short_location(code.co_filename, code.co_firstlineno) \
            if code is not None and is_user_file(code.co_filename) else ""
        n = float(w.numel())

        def callback(v: list[float]) -> None:
            neg, pos, zeros, levels, lo, hi = v[0] / n, v[1] / n, v[2] / n, int(v[3]), v[4], v[5]
            if levels > MAX_LEVELS or levels >= n / 2 or min(neg, pos) < prunesign.MIN_NEGATIVE:
                return
            if zeros < prunesign.MIN_ZEROS or zeros >= 1:
                return
            small, large = sorted((max(-lo, 0.0), max(hi, 0.0)))
            if large > 0 and small / large < prunesign.ONE_SIDE:
                self._report(name, label, type(module).__name__, line, neg, pos, zeros, levels, lo, hi)

        self.s.defer(vals, callback)

    def _report(self, name: str, label: str, cls: str, line: str, neg: float, pos: float, zeros: float, levels: int,
                lo: float, hi: float) -> None:
        kept = "positive" if hi > 0 else "negative"
        lost = "negative" if kept == "positive" else "positive"
        msg = (f"{name} is {neg:.0%} negative and {pos:.0%} positive, and the weight the forward computes from it "
               f"through {label}{f', forward at {line}' if line else ''} is quantised ({levels} distinct values) "
               f"with {zeros:.0%} of its elements exactly zero and every non-zero level {kept} (from {lo:.3g} to "
               f"{hi:.3g}): every {lost} weight is clamped to zero in the forward, while the stored weight keeps its "
               "signs. A quantiser's grid covers the range it is calibrated for, both signs; an asymmetric integer "
               "range (quant_min 0) whose zero point is left at 0 covers [0, quant_max * scale] only. The layer "
               f"computes with a weight that has lost its {lost} half, and the quantised model's accuracy falls.")
        fix = ("set the zero point from the range's minimum (zero_point = round(-min / scale), clamped to "
               "[quant_min, quant_max]) or quantise the weights to a symmetric signed range (quant_min = -128, "
               "quant_max = 127, zero point 0).")
        where = f"{cls}.forward at {line}" if line else name
        self.s.report("pruning-removes-one-sign", msg, where=where, fix=fix, key=f"quant:{name}")

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is self.model:
            self._unhook()
            self.model = None

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def remove_hooks(self) -> None:
        self._unhook()
        self.assigned.remove()


__all__ = ["QuantSignChecks"]
