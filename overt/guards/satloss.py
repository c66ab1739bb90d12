"""Guard on a pairwise loss that is a plain sum of sigmoids of a margin between the model's scores (slug
``loss-saturates-when-wrong``; issue 33, the wild corpus's w443).

Premise, one sentence: a ranking or preference loss on the margin between two scores (chosen minus rejected,
positive minus negative) gives the pairs it gets most wrong at least as much gradient as the pairs near its decision
boundary -- true of the log-sigmoid (Bradley-Terry, BPR, DPO), softplus, hinge, margin-ranking and InfoNCE losses
alike -- so in a correct program no pair the model ranks confidently wrong is left without gradient.

A loss that is *linear in* ``sigmoid(margin)`` (``-sigmoid(margin).mean()``, ``(1 - sigmoid(x_uij)).sum()``: the
``log`` of ``-log sigmoid`` left out) breaks it: its gradient on the margin is ``sigmoid'(margin)``, which peaks at
the boundary and vanishes on the pairs ranked wrong by a wide margin.  Nothing fails, the loss falls, and the
worst-ranked pairs are never corrected.

What is observed, on checked training steps only (:mod:`overt.guards.termscale`'s wrapper of
``torch.autograd.backward`` hands it the root before the user's backward runs): the root's graph is walked through
linear nodes only (reductions, sign changes, sums of terms, scalar factors and divisors, ``1 - x``, reshapes,
concatenations); a ``sigmoid`` reached that way, with at least :data:`MIN_ELEMENTS` elements, whose input is a
difference of two tensors that both carry a gradient (possibly reshaped or scaled by a number: a
temperature, DPO's beta) and reaches the output of a watched model within :data:`MODEL_DEPTH` nodes, is a pairwise
loss linear in a sigmoid of the margin.  The walk knows the sign with which the sigmoid enters the loss, so which
side is wrong: where the loss falls as the sigmoid grows, an element below :data:`WRONG` is a pair ranked
confidently wrong (its gradient is under a fifth of a boundary pair's); the count of such elements is queued with
the step's deferred reads (no synchronisation of its own).

Reported at the backward's line when that count was non-zero on :data:`SAME` probes of different steps.  Silent:
a sigmoid weighted by a tensor (a label or mask factor: its sign per element is not read), a sigmoid followed by any
non-linear function (a ``log``, a square, a BCE), a sigmoid of one score rather than of a difference (a gate, a
penalty on gate activations, a per-example soft accuracy), a sigmoid of something no watched model produced (a
learned coefficient), a run in which the model never ranks a pair confidently wrong (then nothing is lost).  A
ramp (sigmoid) loss chosen on purpose for robustness to label noise has exactly this gradient and is reported too:
the message says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

WRONG = 0.05  # sigmoid on the wrong side beyond which an element's gradient is under a fifth of the boundary's
SAME = 2  # probes (different steps) on which some element must be confidently wrong
MIN_ELEMENTS = 8  # a sigmoid of fewer elements is a gate or a coefficient, not per-example scores
MAX_SITES = 4  # backward lines followed
MAX_WALK = 64  # linear nodes walked from the root
MAX_SIGMOIDS = 4  # sigmoids followed per backward
MODEL_DEPTH = 16  # nodes searched below the sigmoid for a watched model's output
MAX_NODES = 4096  # graph nodes visited below one sigmoid
MARGIN_DEPTH = 4  # nodes (reshapes, a positive scale) passed below the sigmoid to reach the margin's subtraction
_PASS = frozenset((
    "MeanBackward0", "MeanBackward1", "SumBackward0", "SumBackward1", "ViewBackward0", "UnsafeViewBackward0",
    "ReshapeAliasBackward0", "SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2", "UnsqueezeBackward0",
    "ExpandBackward0", "CloneBackward0", "ToCopyBackward0", "AddBackward0", "AddBackward1", "SubBackward1",
    "CatBackward0", "SelectBackward0", "SliceBackward0",
))
_SHAPE = frozenset((
    "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "SqueezeBackward0", "SqueezeBackward1",
    "SqueezeBackward2", "UnsqueezeBackward0", "CloneBackward0", "ToCopyBackward0",
))
_FLIP = frozenset(("NegBackward0", "RsubBackward1"))  # -x and c - x


class _Site:
    __slots__ = ("seen", "done")

    def __init__(self) -> None:
        self.seen: dict[int, list[tuple[int, int, int]]] = {}  # sigmoid index -> (step, wrong count, elements)
        self.done = False


class SaturatedLossChecks(Check):
    name = "satloss"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.sites: dict[str, _Site] = {}

    def on_backward(self, tensors: Any, outputs: dict[int, Any]) -> None:
        """Find the sigmoids of a margin a checked step's loss is linear in; queue how many pairs are ranked
        confidently wrong."""
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1 or tensors.grad_fn is None or not outputs:
            return
        loc = user_location(2) or "the backward call"
        site = self.sites.get(loc)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                return
            site = self.sites[loc] = _Site()
        if site.done:
            return
        found = [(sign, out) for node, sign, out in _linear_sigmoids(tensors.grad_fn)
                 if _reaches_model(node, outputs)]
        if not found:
            return
        counts = []
        for sign, out in found:
            y = out.detach()
            wrong = (y < WRONG) if sign < 0 else (y > 1.0 - WRONG)  # sign < 0: the loss falls as the sigmoid grows
            counts.append(wrong.sum().float().to(tensors.device))
        sizes = [out.numel() for _, out in found]
        step = self.s.step
        self.s.defer(torch.stack(counts), lambda values: self._judge(site, loc, sizes, step, values))

    def _judge(self, site: _Site, loc: str, sizes: list[int], step: int, values: list[float]) -> None:
        if site.done:
            return
        for i, (v, n) in enumerate(zip(values, sizes)):
            if v <= 0:
                continue
            seen = site.seen.setdefault(i, [])
            if not seen or seen[-1][0] != step:
                seen.append((step, int(v), n))
            if len(seen) >= SAME:
                site.done = True
                self._report(loc, seen)
                return

    def _report(self, loc: str, seen: list[tuple[int, int, int]]) -> None:
        shown = ", ".join(f"{w} of {n} at step {s}" for s, w, n in seen[:4])
        msg = (f"The loss backwarded at {loc} is linear in a sigmoid of a margin between the model's scores (such "
               "as -sigmoid(chosen - rejected).mean() or 1 - sigmoid(pos - neg): a log-sigmoid loss without its "
               "log). Its gradient on each margin is sigmoid'(margin), largest at the decision boundary and "
               "vanishing on the pairs the model ranks most wrong. Pairs ranked confidently wrong (sigmoid beyond "
               f"{WRONG} on the side the loss pushes away from, each with under a fifth of a boundary pair's "
               f"gradient): {shown}. Those pairs (a reward model's worst-ranked preferences, a recommender's "
               "liked items scored far below unliked ones) are never corrected while the loss falls normally; a "
               "log-sigmoid (Bradley-Terry, BPR, DPO) loss gives them the largest gradient instead. If a bounded "
               "ramp loss was chosen on purpose for label noise, this is its known cost.")
        fix = ("take the log: -F.logsigmoid(margin).mean(), equivalently F.softplus(-margin).mean().")
        self.s.report("loss-saturates-when-wrong", msg, where=loc, fix=fix, key=loc)


def _linear_sigmoids(root: Any) -> list[tuple[Any, int, torch.Tensor]]:
    """The sigmoid nodes the root is linear in: (node, sign with which it enters the loss, its saved output)."""
    out: list[tuple[Any, int, torch.Tensor]] = []
    seen = {root}
    todo: list[tuple[Any, int]] = [(root, 1)]
    walked = 0
    while todo and walked < MAX_WALK and len(out) < MAX_SIGMOIDS:
        node, sign = todo.pop(0)
        walked += 1
        kind = type(node).__name__
        nxt = [n for n, _ in node.next_functions]
        if kind == "SigmoidBackward0":
            y = _saved(node, "_saved_result")
            if y is not None and y.numel() >= MIN_ELEMENTS and _is_margin(node.next_functions[0][0]):
                out.append((node, sign, y))
            continue
        if kind in _PASS:
            following = [(n, sign) for n in nxt]
        elif kind in _FLIP:
            following = [(n, -sign) for n in nxt]
        elif kind == "SubBackward0" and len(nxt) == 2:
            alpha = getattr(node, "_saved_alpha", 1)
            following = [(nxt[0], sign), (nxt[1], -sign if _number(alpha) > 0 else sign)]
        elif _scaled(node) is not None:
            below, factor = _scaled(node)  # type: ignore[misc]
            following = [(below, sign if factor > 0 else -sign)]
        else:
            continue
        for n, s in following:
            if n is not None and n not in seen:
                seen.add(n)
                todo.append((n, s))
    return out


def _scaled(node: Any) -> tuple[Any, float] | None:
    """``(the node below, the factor)`` where ``node`` multiplies or divides by a non-zero number: a Python scalar
    (``MulBackward1``, ``DivBackward1``, or a wrapped scalar with no gradient) or a one-element CPU tensor that
    carries none (a count, a coefficient); None otherwise (a per-element weight: its sign per element is not read;
    a device scalar is not read, so no synchronisation)."""
    kind = type(node).__name__
    nxt = [n for n, _ in node.next_functions]
    if kind in ("MulBackward1", "DivBackward1") and nxt:
        factor = _number(_saved_any(node, "_saved_other"))
        return (nxt[0], factor) if factor == factor and factor != 0 else None
    if kind not in ("MulBackward0", "DivBackward0") or len(nxt) != 2 or (nxt[0] is None) == (nxt[1] is None):
        return None
    if kind == "DivBackward0" and nxt[1] is not None:
        return None  # a division by something with a gradient
    k = 0 if nxt[1] is None else 1  # the factor with a gradient
    const = _saved_any(node, "_saved_other" if k == 0 else "_saved_self")
    if not isinstance(const, torch.Tensor) or const.numel() != 1:
        return None
    factor = _number(const)
    return (nxt[k], factor) if factor == factor and factor != 0 else None


def _is_margin(node: Any) -> bool:
    """Whether ``node`` (a sigmoid's input) is a difference of two tensors that both carry a gradient -- a margin
    between two scores -- possibly scaled by a number (a temperature, DPO's beta) or reshaped."""
    for _ in range(MARGIN_DEPTH):
        kind = type(node).__name__
        nxt = [n for n, _ in node.next_functions] if node is not None else []
        if kind == "SubBackward0":
            return len(nxt) == 2 and all(n is not None for n in nxt)
        if kind in _SHAPE:
            node = nxt[0] if nxt else None
            continue
        scaled = _scaled(node)
        if scaled is not None:
            node = scaled[0]
            continue
        return False
    return False


def _reaches_model(node: Any, outputs: dict[int, Any]) -> bool:
    """Whether a watched model's output node is within :data:`MODEL_DEPTH` nodes below ``node``."""
    level = [node]
    seen = {node}
    for _ in range(MODEL_DEPTH):
        nxt = []
        for n in level:
            if id(n) in outputs and outputs[id(n)] is n:
                return True
            for m, _ in n.next_functions:
                if m is not None and m not in seen and len(seen) < MAX_NODES:
                    seen.add(m)
                    nxt.append(m)
        level = nxt
        if not level:
            return False
    return False


def _saved_any(node: Any, attr: str) -> Any:
    try:
        return getattr(node, attr)
    except Exception:  # noqa: BLE001  not saved, or freed
        return None


def _saved(node: Any, attr: str) -> torch.Tensor | None:
    value = _saved_any(node, attr)
    return value if isinstance(value, torch.Tensor) and value.dtype.is_floating_point else None


def _number(value: Any) -> float:
    """A saved scalar as a float (a one-element tensor on the CPU is read); NaN when unknown."""
    if isinstance(value, torch.Tensor) and (value.numel() != 1 or value.device.type != "cpu"):
        return float("nan")  # a device scalar is not read (no synchronisation): silent
    try:
        return float(value)
    except Exception:  # noqa: BLE001  not a number
        return float("nan")
