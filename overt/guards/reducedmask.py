"""Guard on a per-sample mask or weight multiplied into a loss already reduced over the samples (slug
``mask-on-reduced-loss``; issue 33, session 56).

The premise, true of every correct program that masks or weighs samples: a per-sample mask or weight multiplies
per-sample values.  A value already reduced over the whole batch -- ``torch.sum(x)`` without ``dim``, a loss
called with its default ``reduction="mean"`` -- multiplied by a tensor with one entry per sample gives every sample
the whole batch's value: the mask selects nothing (padded and masked samples still count), the weights only rescale
the loss, and a summed term grows with the batch against the terms that were masked per sample.  Nothing fails and
every loss falls: ``(F.cross_entropy(logits, y) * mask).sum() / mask.sum()``, ``F.mse_loss(p, y) * sample_weight``,
or a VAE's ``-0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp()) * seq_mask`` next to a per-event
reconstruction.

What is observed, on checked training steps only (the wrapper of ``torch.autograd.backward`` of
:mod:`overt.guards.termscale`, in place only while a checked step lasts), on the host, in autograd's graph of the
backwarded loss (at most :data:`MAX_NODES` nodes, a watched model's graph not entered): a product of a tensor that
takes no gradient, with ``R >= MIN_ROWS`` rows and at least two elements, and a one-element value that is a full
reduction (``sum``/``mean`` without ``dim``, or a loss's ``"sum"``/``"mean"`` reduction), through at most
:data:`MAX_SCALAR` scalar operations with constants, of a tensor of as many rows ``R`` that is computed from a watched
model's output of this step.  The constant's smallest and largest values are read with the step's deferred reads
(no synchronisation).  Reported, once per backward line, when they differ (a uniform factor is a scale, not a
mask).  Silent: a reduction over some dimensions only (``sum(dim=-1)``: per-sample), a constant of another row count
(a class weight vector, a scalar), a constant with one value everywhere (a mask of ones), a product of two tensors
that both take gradients (a normalisation in a model or a loss), a reduction of parameters only (a regulariser).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.termscale import _constant, reduction
from overt.guards.where import assignment_location, user_frame, user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

MIN_ROWS = 4  # rows of the mask and of the reduced tensor: fewer is not a batch of samples
MAX_NODES = 400  # autograd nodes walked from the loss (a watched model's graph is not entered)
MAX_SCALAR = 6  # one-element operations followed from the product down to the reduction
MAX_REACH = 20000  # nodes walked from the reduced tensor looking for a watched model's output
MAX_SITES = 4  # backward lines reported at most
LOOKS = 6  # checked backwards walked per backward line before the line is left alone
#: one-element operations with a constant that keep a reduction's value a function of the whole batch
_SCALAR_ONE = frozenset(("NegBackward0", "MulBackward1", "DivBackward1", "AddBackward1", "SubBackward1",
                         "RsubBackward1", "CloneBackward0", "ToCopyBackward0", "ViewBackward0", "SqueezeBackward0",
                         "UnsqueezeBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0"))
_SCALAR_TWO = frozenset(("MulBackward0", "DivBackward0", "AddBackward0", "SubBackward0", "RsubBackward0"))
_LOSS_NAMES = {"MseLossBackward0": "mse_loss", "L1LossBackward0": "l1_loss", "NllLossBackward0": "nll_loss",
               "SmoothL1LossBackward0": "smooth_l1_loss", "HuberLossBackward0": "huber_loss",
               "BinaryCrossEntropyBackward0": "binary_cross_entropy",
               "BinaryCrossEntropyWithLogitsBackward0": "binary_cross_entropy_with_logits",
               "KlDivBackward0": "kl_div"}


class Found:
    """One product of a per-sample constant with a reduction over the whole batch."""

    __slots__ = ("prod", "const", "red", "kind", "shape")

    def __init__(self, prod: Any, const: torch.Tensor, red: Any, kind: str, shape: tuple[int, ...]):
        self.prod = prod  # the product's autograd node
        self.const = const  # the tensor without gradient (the mask or the weights)
        self.red = red  # the reduction's autograd node
        self.kind = kind  # "sum" | "mean"
        self.shape = shape  # the reduced tensor's shape


def _const_side(fn: Any) -> tuple[torch.Tensor, Any] | None:
    """(the constant tensor, the other side's node) of a ``MulBackward0`` whose one side takes no gradient."""
    nxt = fn.next_functions
    if len(nxt) != 2 or (nxt[0][0] is None) == (nxt[1][0] is None):
        return None
    a = nxt[0][0]
    try:
        const = getattr(fn, "_saved_other" if a is not None else "_saved_self")
    except Exception:  # noqa: BLE001  freed
        return None
    if not isinstance(const, torch.Tensor) or const.requires_grad:
        return None
    return const, (a if a is not None else nxt[1][0])


def _whole_reduction(node: Any) -> tuple[Any, str, tuple[int, ...]] | None:
    """The full reduction (node, "sum" | "mean", the reduced shape) that a one-element value ``node`` is, through at
    most :data:`MAX_SCALAR` one-element operations with constants; None when it is anything else."""
    for _ in range(MAX_SCALAR + 1):
        if node is None:
            return None
        red = reduction(node)
        if red is not None:
            return node, red[0], red[1]
        kind = type(node).__name__
        nxt = node.next_functions
        if kind in _SCALAR_ONE and len(nxt) >= 1:
            node = nxt[0][0]
            continue
        if kind in _SCALAR_TWO and len(nxt) == 2 and (nxt[0][0] is None) != (nxt[1][0] is None):
            a = nxt[0][0]
            if kind in ("MulBackward0", "DivBackward0"):
                value, known = _constant(getattr(node, "_saved_other" if a is not None else "_saved_self", None))
                if value is None and not known:
                    return None  # a tensor factor: the value is no longer one element of the batch's
            node = a if a is not None else nxt[1][0]
            continue
        return None
    return None


def products(root: Any, outputs: dict[int, Any]) -> list[Found]:
    """Each product, in the loss's graph from ``root``, of a per-sample constant and a reduction over the whole
    batch of a tensor computed from a watched model's output (``outputs``: id -> grad_fn of this step's outputs)."""
    seen = {root}
    todo = [root]
    found: list[Found] = []
    while todo and len(seen) < MAX_NODES:
        fn = todo.pop()
        if id(fn) in outputs and outputs[id(fn)] is fn:
            continue  # a watched model's output: its graph is the model's, not the loss's
        if type(fn).__name__ == "MulBackward0":
            side = _const_side(fn)
            if side is not None:
                const, other = side
                whole = _whole_reduction(other)
                if whole is not None and _per_sample(const, whole[2]) and _reaches(whole[0], outputs):
                    found.append(Found(fn, const, whole[0], whole[1], whole[2]))
                    continue
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return found


def _per_sample(const: torch.Tensor, shape: tuple[int, ...]) -> bool:
    """Whether ``const`` has one entry per row of the reduced tensor (``shape``) and more than one element."""
    return (const.dim() >= 1 and len(shape) >= 1 and shape[0] >= MIN_ROWS and int(const.shape[0]) == shape[0]
            and const.numel() >= 2 and math.prod(shape) >= 2 and const.device.type != "meta")


def _reaches(node: Any, outputs: dict[int, Any]) -> bool:
    """Whether the graph below ``node`` holds a watched model's output of this step."""
    seen = {node}
    todo = [node]
    while todo and len(seen) < MAX_REACH:
        fn = todo.pop()
        if id(fn) in outputs and outputs[id(fn)] is fn:
            return True
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


class ReducedMaskChecks(Check):
    name = "reducedmask"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.done: set[str] = set()
        self.looked: dict[str, int] = {}  # backward line -> checked backwards walked

    def on_backward(self, tensors: Any, outputs: dict[int, Any]) -> None:
        """Called by the backward wrapper of a checked step (before termscale forgets the step's outputs)."""
        if len(self.done) >= MAX_SITES or not outputs:
            return
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        root = getattr(tensors, "grad_fn", None)
        if root is None or tensors.numel() != 1:
            return
        loc = user_location(4) or "the backward call"
        if loc in self.done or self.looked.get(loc, 0) >= LOOKS:
            return
        self.looked[loc] = self.looked.get(loc, 0) + 1
        found = products(root, outputs)[:2]
        frame = user_frame() if found else None
        for f in found:
            c = f.const.detach()
            c = c.float() if c.dtype == torch.bool else c
            stats = torch.stack((c.amin(), c.amax())).float()
            self.s.defer(stats, self._judge(f, loc, _product_line(frame, f) if frame is not None else None))

    def _judge(self, f: Found, loc: str, named: tuple[str, str] | None):
        shape = tuple(int(n) for n in f.const.shape)
        what = _what(f)
        lead = ""
        if named is not None:
            lead = f"`{named[0]}`" + (f" (assigned at {named[1]})" if named[1] else "") + " is a product: "
        red_kind, red_shape = f.kind, f.shape

        def callback(vals: list[float]) -> None:
            lo, hi = vals
            if loc in self.done or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
                return  # one value everywhere: a scale, not a mask
            self.done.add(loc)
            where = named[1] if named is not None and named[1] else loc
            self._report(lead, what, red_kind, red_shape, shape, lo, hi, loc, where)
        return callback

    def _report(self, lead: str, what: str, kind: str, red: tuple, shape: tuple, lo: float, hi: float, loc: str,
                where: str) -> None:
        n = red[0]
        rs = "x".join(str(k) for k in red)
        ms = "x".join(str(k) for k in shape)
        binary = lo == 0 and hi == 1
        role = "mask" if binary else "weights"
        effect = ("the mask selects nothing: the entries it zeroes (padding, masked samples) still count in that "
                  "value, and after the product is summed the term grows with the number of entries the mask keeps"
                  if binary else
                  "the weights weigh nothing: every sample gets the same total, so they only rescale the loss by "
                  "their sum or mean")
        if kind == "sum":
            effect += ", a term that then outweighs the per-sample terms beside it by about the batch's size"
        start = "the" if lead else "The"
        one = "weight" if role == "weights" else role
        msg = (f"{lead}{start} loss backwarded at {loc} multiplies {what}, a {kind} over the whole {rs} tensor (all "
               f"{n} samples of the batch), by a {ms} tensor that takes no gradient and has one entry per sample "
               f"(values {lo:.3g} to {hi:.3g}: per-sample {role}). A per-sample {one} "
               f"multiplies per-sample values; multiplied into a value already reduced over the batch it gives every "
               f"sample the whole batch's {kind}: {effect}. Nothing fails and the loss falls.")
        fix = ("reduce per sample before the mask or weights: torch.sum(x, dim=...) over the non-sample dimensions "
               "(or the loss with reduction='none'), multiply by the mask or weights, then reduce over the samples "
               "(divided by the mask's sum for a masked mean).")
        self.s.report("mask-on-reduced-loss", msg, where=where, fix=fix, key=loc)


def _product_line(frame: Any, f: Found) -> tuple[str, str] | None:
    """(the name, ``file:line`` of its last assignment) of the variable of the backward's calling ``frame`` that
    holds the product (its ``grad_fn`` is the product's node, or the product times a constant), when the user's code
    named it."""
    for name, val in list(frame.f_locals.items()):
        fn = getattr(val, "grad_fn", None) if isinstance(val, torch.Tensor) else None
        if fn is None or name.startswith("_"):
            continue
        if fn is f.prod or any(nxt is f.prod for nxt, _ in fn.next_functions):
            return name, assignment_location(frame, name)
    return None


def _what(f: Found) -> str:
    """How the reduction reads in the message."""
    name = _LOSS_NAMES.get(type(f.red).__name__)
    if name is None and type(f.red).__name__.endswith("LossBackward0"):
        name = type(f.red).__name__[:-len("Backward0")]
    if name is not None:
        return f"F.{name}(..., reduction='{f.kind}')"
    return f"torch.{f.kind}(...) taken without dim"
