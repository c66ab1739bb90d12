"""Class weights applied after a per-sample binary loss, as a ``torch.where`` on the target or a weight tensor (slug ``class-weights-inverted``; issue 33, round
nineteen's w418).

The invariant of :mod:`overt.guards.classweights`, for weights that never reach the loss call: re-weighting
makes the rare class count more, so a class seen more often than the other never gets the larger weight.
A binary loss computed per sample (``reduction="none"``) and then weighted by class with
``torch.where(target == 1, loss * a, loss * b)`` passes no ``weight`` or ``pos_weight`` to the loss
function, so the weights are read off autograd's graph instead, on checked steps, when the loss is
backwarded (:mod:`overt.guards.termscale`'s wrapper of ``torch.autograd.backward``):

- a ``where`` node in the backwarded loss's graph whose two branches are one tensor ``X`` multiplied by
  two host constants (one branch may be ``X`` itself: weight 1);
- or a product ``X * W`` with ``W`` a tensor that takes no gradient (``alpha * t + (1 - alpha) * (1 - t)``),
  with one value on every positive and one on every negative of the step (else a per-sample weight: silent);
- ``X`` is a function of the input of a binary loss call of this step (its graph reaches the call's
  input within :data:`MAX_WALK` nodes), and the ``where``'s condition is that call's target ``== 1``
  (or ``== 0``) element for element (``W`` has as many elements as the target), the targets all 0 or 1:
  the weights are per class.

The classes are counted on the device and read with the checked step's values (deferred: nothing is
synchronised).  Once :data:`MIN_LABELS` targets are counted the pair is judged:

- weights that add up to 1 (``alpha`` and ``1 - alpha``, the alpha-balanced focal loss, whatever
  ``alpha``): silent, the user chose the balance;
- one class left at weight 1 and the other given a factor (a balance applied to one class only):
  reported when the classes are clearly imbalanced (:data:`IMBALANCE`) and the frequent class has the
  larger weight (a factor below 1 on the rare class: ``where(target == 1, fl * alpha, fl)`` for
  ``alpha * fl + (1 - alpha) * ...``);
- any other pair: :func:`overt.guards.classweights.inverted` (imbalanced, clearly unequal, the frequent
  class heavier).

A condition that is not the target's class (a mask of valid positions, a confidence threshold), soft
targets, targets of a loss the weighted tensor does not come from: silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.classweights import IMBALANCE, MIN_LABELS, inverted
from overt.guards.termscale import _constant

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo

BINARY = ("binary_cross_entropy_with_logits", "binary_cross_entropy")
MAX_WALK = 200  # autograd nodes walked from the loss looking for a where, and from a where to a loss input
MAX_CALLS = 8  # binary loss calls of one step remembered
MAX_TRIED = 8  # candidate weightings followed back to a loss input per backward
SUM_ONE = 1e-6  # weights a and b with |a + b - 1| below this are an alpha-balanced pair


def _walk(root: Any, limit: int = MAX_WALK):
    """The autograd nodes reachable from ``root``, breadth first, at most ``limit``."""
    seen = {root}
    todo = [root]
    while todo:
        fn = todo.pop(0)
        yield fn
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen and len(seen) < limit:
                seen.add(nxt)
                todo.append(nxt)


def _scaled(fn: Any) -> tuple[Any, float] | None:
    """(X's node, c) when ``fn`` computes ``X * c`` or ``X / c`` with a host constant ``c``."""
    kind = type(fn).__name__
    nxt = fn.next_functions
    if kind in ("MulBackward1", "DivBackward1") and len(nxt) == 1 and nxt[0][0] is not None:
        value = getattr(fn, "_saved_other", None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            return nxt[0][0], float(value) if kind == "MulBackward1" else 1.0 / float(value)
        return None
    if kind in ("MulBackward0", "DivBackward0") and len(nxt) == 2 and (nxt[0][0] is None) != (nxt[1][0] is None):
        a = nxt[0][0]
        if kind == "DivBackward0" and a is None:
            return None
        value, _ = _constant(getattr(fn, "_saved_other" if a is not None else "_saved_self", None))
        if value is None or value == 0:
            return None
        return (a if a is not None else nxt[1][0]), (value if kind == "MulBackward0" else 1.0 / value)
    return None


def class_weighting(fn: Any) -> tuple[Any, float, float] | None:
    """(X's node, weight where the condition holds, weight elsewhere) when the ``where`` node ``fn`` picks
    between ``X * a`` and ``X * b`` (either may be ``X`` itself), else None."""
    if type(fn).__name__ != "WhereBackward0" or len(fn.next_functions) != 2:
        return None
    yes, no = fn.next_functions[0][0], fn.next_functions[1][0]
    if yes is None or no is None:
        return None
    sy, sn = _scaled(yes), _scaled(no)
    if sy is not None and sy[0] is no:
        return no, sy[1], 1.0
    if sn is not None and sn[0] is yes:
        return yes, 1.0, sn[1]
    if sy is not None and sn is not None and sy[0] is sn[0]:
        return sy[0], sy[1], sn[1]
    return None


def tensor_weight(fn: Any) -> tuple[Any, torch.Tensor] | None:
    """(X's node, W) when ``fn`` computes ``X * W`` with ``W`` a tensor of more than one element that takes no
    gradient (a weight built from the targets, ``alpha * t + (1 - alpha) * (1 - t)``), else None."""
    if type(fn).__name__ != "MulBackward0" or len(fn.next_functions) != 2:
        return None
    a, b = fn.next_functions[0][0], fn.next_functions[1][0]
    if (a is None) == (b is None):
        return None
    w = getattr(fn, "_saved_other" if a is not None else "_saved_self", None)
    if not isinstance(w, torch.Tensor) or w.numel() < 2 or w.requires_grad or w.dtype == torch.bool:
        return None
    return (a if a is not None else b), w


def favours_frequent(counts: list[float], weights: list[float]) -> bool:
    """Whether per-class ``weights`` of two classes with ``counts`` favour the frequent class (see the module
    doc: an alpha-balanced pair is the user's choice; a pair with one class at 1 is judged at any spread)."""
    wa, wb = weights
    if min(wa, wb) <= 0 or wa == wb or min(counts) <= 0:
        return False
    if abs(wa + wb - 1.0) < SUM_ONE:
        return False
    if 1.0 in (wa, wb):
        return max(counts) >= IMBALANCE * min(counts) and (counts[0] - counts[1]) * (wa - wb) > 0
    return inverted(counts, weights)


class WhereWeightChecks(Check):
    name = "whereweight"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.calls: list[tuple[Any, torch.Tensor, str, str]] = []  # (input's grad_fn, target, F.name, line)
        self.counts: dict[tuple, list[float]] = {}  # (line, weights) -> [targets, in the condition's class]
        self.done: set[str] = set()
        self.at = -1

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in BINARY or not isinstance(target, torch.Tensor) or not isinstance(inp, torch.Tensor):
            return
        if self.at != self.s.step:  # this step's graph nodes only (graph-leak)
            self.calls.clear()
            self.at = self.s.step
        fn = inp.grad_fn
        if fn is None or not target.numel() or target.device.type == "meta" or len(self.calls) >= MAX_CALLS:
            return
        self.calls.append((fn, target.detach(), name, self.s.losses.site() or f"F.{name}"))

    def after_checked_step(self, oi: OptInfo) -> None:
        self.calls.clear()

    def remove_hooks(self) -> None:
        self.calls.clear()

    def on_backward(self, tensors: Any) -> None:
        """Called by the backward wrapper of a checked step: find the where-weights of the loss."""
        try:
            self._look(tensors)
        finally:
            self.calls.clear()

    def _look(self, tensors: Any) -> None:
        if not self.calls or len(self.done) > 8:
            return
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        root = getattr(tensors, "grad_fn", None)
        if root is None or tensors.numel() != 1:
            return
        tried = 0
        for fn in _walk(root):
            if tried >= MAX_TRIED:
                return
            got = class_weighting(fn)
            if got is not None:
                x, wy, wn = got
                cond = getattr(fn, "_saved_condition", None)
                if not isinstance(cond, torch.Tensor) or cond.dtype != torch.bool:
                    continue
                weights: torch.Tensor | tuple[float, float] = (wy, wn)
                mask: torch.Tensor | None = cond
            else:
                tw = tensor_weight(fn)
                if tw is None:
                    continue
                x, weights = tw
                mask = None
            size = mask.numel() if mask is not None else weights.numel()  # type: ignore[union-attr]
            for inp_fn, target, name, loc in self.calls:
                if loc in self.done or target.numel() != size or size < 2:
                    continue
                on = mask if mask is not None else weights
                if target.device != on.device:  # type: ignore[union-attr]
                    continue
                tried += 1
                if not any(node is inp_fn for node in _walk(x)):
                    continue
                self._defer(target, name, loc, weights, mask)
                return

    def _defer(self, target: torch.Tensor, name: str, loc: str, weights: Any, mask: torch.Tensor | None) -> None:
        """Queue the step's class counts and the weights per class: [binary?, positives, then either (the condition
        is target == 1, is target == 0) or (min, max of the positives' weights, min, max of the negatives')]."""
        t = target.reshape(-1)
        ones = t == 1
        head = (((t == 0) | ones).all().float(), ones.sum().float())
        if mask is not None:
            c = mask.reshape(-1)
            value = torch.stack((*head, (c == ones).all().float(), (c == ~ones).all().float()))
        else:
            w = weights.detach().reshape(-1).float()
            inf = torch.full_like(w, float("inf"))
            value = torch.stack((*head, torch.where(ones, w, inf).min(), torch.where(ones, w, -inf).max(),
                                 torch.where(ones, inf, w).min(), torch.where(ones, -inf, w).max()))
            weights = None
        self.s.defer(value, self._judge(name, loc, t.numel(), weights, self.s.step))

    def _judge(self, name: str, loc: str, n: int, weights: tuple[float, float] | None, step: int):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            binary, pos = vals[0], vals[1]
            if not binary:
                self.done.add(loc)  # soft targets: no classes
                return
            if weights is not None:  # a where: (weight where the condition holds, elsewhere)
                is_pos, is_neg = vals[2], vals[3]
                if not (is_pos or is_neg):
                    self.done.add(loc)  # a condition that is not the target's class
                    return
                wp, wneg = weights if is_pos else weights[::-1]
                on_pos = bool(is_pos)
            else:  # a weight tensor: one value per class, or it is no class weighting
                p_lo, p_hi, n_lo, n_hi = vals[2:6]
                if not (pos and n - pos) or p_lo != p_hi or n_lo != n_hi:
                    if pos and n - pos:
                        self.done.add(loc)  # weights that vary within a class: per-sample weights, not per class
                    return
                wp, wneg = p_lo, n_lo
                on_pos = wp != 1.0
            key = (loc, wp, wneg)
            if self.counts and key not in self.counts and any(k[0] == loc for k in self.counts):
                self.done.add(loc)  # the weights changed during the run: not one weighting to judge
                return
            counts = self.counts.setdefault(key, [0.0, 0.0])
            counts[0] += n
            counts[1] += pos
            if counts[0] < MIN_LABELS:
                return
            self.done.add(loc)
            total, positives = counts
            if favours_frequent([positives, total - positives], [wp, wneg]):
                self._report(name, loc, total, positives, wp, wneg, on_pos, mask=weights is not None, step=step)

        return callback

    def _report(self, name: str, loc: str, total: float, pos: float, wp: float, wneg: float, on_pos: bool,
                mask: bool, step: int) -> None:
        rare, common = ("positives", "negatives") if pos * 2 < total else ("negatives", "positives")
        share = pos / total if rare == "positives" else 1 - pos / total
        w_rare, w_common = (wp, wneg) if rare == "positives" else (wneg, wp)
        cls = 1 if on_pos else 0
        factor = wp if on_pos else wneg
        one = ""
        if 1.0 in (wp, wneg):
            one = (f" The factor {factor:.3g} is applied to class {cls} only and the other class keeps weight 1: "
                   f"a balance factor alpha weighs the other class by 1 - alpha ({1 - factor:.3g}), which would make "
                   f"the {'positives' if on_pos else 'negatives'} weigh {factor / max(1 - factor, 1e-12):.3g} times "
                   "the others.") if 0 < factor < 1 else ""
        self.s.report(
            "class-weights-inverted",
            f"the per-sample loss of F.{name} at {loc} is weighted by class "
            f"{'with torch.where on its target' if mask else 'by a weight tensor that is one value per class'}: the "
            f"{rare} ({share:.1%} of {int(total)} training targets) weigh {w_rare:.3g}, the {common} weigh "
            f"{w_common:.3g}. The frequent class gets the larger weight, so the rare one is learned less than "
            f"without any weighting.{one} Re-weighting is meant to make the rare class count more (look at its "
            "recall).",
            fix="weigh both classes: torch.where(target == 1, loss * alpha, loss * (1 - alpha)) (or alpha_t = "
            "alpha * target + (1 - alpha) * (1 - target)), with alpha the rare class's share of the weight.",
            where=f"F.{name} call at {loc}" if not loc.startswith("F.") else f"{loc} call", key=f"where:{loc}",
            step=step)
