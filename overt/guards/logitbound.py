"""Guard on classification losses whose logits are bounded by construction (slug ``logits-bounded``; issue 33).

An invariant of correct training: a classification loss can reach its minimum on the outputs the
program gives it.  Cross-entropy (and NLL on ``log_softmax``, and BCE with logits) on hard labels
reaches zero only as the right logit's lead over the others grows without bound.  Logits that are
bounded by construction -- a dot product of two L2-normalised vectors (cosine similarities, InfoNCE
written without its temperature), or a ``tanh`` -- stay in ``[-1, 1]``, so the loss has a floor of
``log(1 + (C - 1) * exp(-2))`` (``log(1 + exp(-1))`` for BCE): with 257 candidates it cannot fall
below 3.57, the soft-max over them stays nearly flat and the gradient that separates the classes is
weak, so the model learns slowly while the loss looks like it trains.

Seen on checked steps with gradients enabled, at a ``F.cross_entropy`` with class-index targets and
no label smoothing, a ``F.nll_loss`` on a ``log_softmax``, or a ``F.binary_cross_entropy_with_logits``:
the logits' autograd graph is walked back past ops that only move values (views, transposes, slices,
concatenation: every concatenated part must be bounded) to their maker.  A maker proven bounded is a
matrix or batched matrix product, or a sum of an elementwise product, whose two operands are each
(past ops that move values) a division by a vector norm (``F.normalize``, ``x / x.norm(...)``,
``F.cosine_similarity``), or a ``tanh``.  A scale or a temperature applied anywhere after
the normalisation (a multiplication, a division by a scalar) ends the proof: silent.  The largest
``|logit|`` is then read on the device (with the next checked step's deferred reads) and the finding is
reported only when it is at most 1 (binary targets read too, for BCE): the bound seen, not assumed.

Silent near the premise: ArcFace/CosFace/NormFace margins with a scale ``s`` and CLIP's
``logit_scale.exp() * cos`` (the scale is a multiplication after the product), SimCLR/MoCo logits
divided by a temperature, cosine classifiers with a learnable scale, label smoothing and
soft/probability targets (their minimum may lie inside the bound), non-binary BCE targets, and any
graph the walk cannot prove (a node of another kind, more than ``_LIMIT`` nodes).
"""

from __future__ import annotations

import inspect
import math
import re
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

#: autograd nodes that only move, copy or select values: a bound on their input is a bound on their output
_MOVES = frozenset(("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "SqueezeBackward0",
                    "SqueezeBackward1", "SqueezeBackward2", "UnsqueezeBackward0", "PermuteBackward0",
                    "TransposeBackward0", "TransposeBackward1", "TBackward0", "ExpandBackward0", "SelectBackward0",
                    "SliceBackward0", "IndexBackward0", "CloneBackward0", "ToCopyBackward0", "AliasBackward0",
                    "NarrowBackward0", "UnbindBackward0", "SplitBackward0", "SplitWithSizesBackward0",
                    "IndexSelectBackward0", "GatherBackward0", "RepeatBackward0"))
_CAT = frozenset(("CatBackward0", "StackBackward0"))
#: dot products: bounded by 1 when both operands are unit vectors (Cauchy-Schwarz)
_PRODUCTS = frozenset(("MmBackward0", "BmmBackward0", "MvBackward0", "DotBackward0"))
_SUMS = frozenset(("SumBackward1",))
_SQUASH = {"TanhBackward0": "tanh"}
#: the divisor of a normalisation: past expand/clamp/clone, a vector norm
_NORMS = frozenset(("LinalgVectorNormBackward0", "NormBackward1", "NormBackward0", "NormBackward3"))
_DIVISOR_PASS = frozenset(("ExpandBackward0", "ClampMinBackward0", "ClampBackward1", "CloneBackward0",
                           "UnsqueezeBackward0", "ViewBackward0", "AddBackward0", "MaximumBackward0"))
#: the kinds of node a loss input proven bounded can have (the others are not walked)
_FIRST = _MOVES | _CAT | _PRODUCTS | _SUMS | frozenset(_SQUASH) | {"MulBackward0", "LogSoftmaxBackward0"}
_LIMIT = 400
_BOUND = 1.0 + 1e-3
_LOSSES = ("cross_entropy", "nll_loss", "binary_cross_entropy_with_logits")


def _kind(node: Any) -> str:
    return type(node).__name__


def _inputs(node: Any) -> list[Any]:
    return [n for n, _ in getattr(node, "next_functions", ())]


def _past_moves(node: Any) -> Any:
    for _ in range(_LIMIT):
        if node is None or _kind(node) not in _MOVES:
            return node
        node = _inputs(node)[0]
    return None


def _is_normalised(node: Any) -> bool:
    """``node`` (past moves) is a division of a tensor by one of its vector norms."""
    node = _past_moves(node)
    if node is None or _kind(node) != "DivBackward0":
        return False
    ins = _inputs(node)
    if len(ins) != 2 or ins[1] is None:
        return False
    d = ins[1]
    for _ in range(8):
        if d is None:
            return False
        k = _kind(d)
        if k in _NORMS:
            return True
        if k not in _DIVISOR_PASS:
            return False
        d = _inputs(d)[0]
    return False


def bounded_maker(node: Any, budget: list[int] | None = None) -> str | None:
    """What makes the tensor of autograd node ``node`` lie in ``[-1, 1]`` by construction ("cosine", "tanh"),
    or None when that is not proven."""
    budget = budget if budget is not None else [_LIMIT]
    node = _past_moves(node)
    budget[0] -= 1
    if node is None or budget[0] <= 0:
        return None
    k = _kind(node)
    if k in _CAT:
        kinds = {bounded_maker(n, budget) for n in _inputs(node) if n is not None}
        return None if not kinds or None in kinds else "/".join(sorted(kinds))
    if k in _SQUASH:
        return _SQUASH[k]
    if k in _SUMS:  # a sum over a dimension of an elementwise product: a dot product written out
        ins = _inputs(node)
        node = ins[0] if ins else None
        if node is None or _kind(node) != "MulBackward0":
            return None
        k = "MulBackward0"
    if k in _PRODUCTS or k == "MulBackward0":
        ins = _inputs(node)
        if len(ins) == 2 and all(n is not None and _is_normalised(n) for n in ins):
            return "cosine"
    return None


def made_at(frame: Any, tensor: torch.Tensor) -> str | None:
    """``"file.py:LINE (name = ...)"``: the last assignment, before the current line of the innermost user frame
    from ``frame`` outwards and not nested deeper than it, of the local variable that holds ``tensor``; None when
    no local holds it (the logits are then made on the loss call's own line) or the source cannot be read."""
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    names = [k for k, v in frame.f_locals.items() if v is tensor]
    if not names:
        return None
    try:
        lines, first = inspect.getsourcelines(frame.f_code)
    except (OSError, TypeError):
        return None
    first = max(first, 1)
    here = frame.f_lineno - first
    if not 0 <= here < len(lines):
        return None
    depth = len(lines[here]) - len(lines[here].lstrip())
    for name in names:
        pat = re.compile(rf"^\s*{re.escape(name)}\s*(=[^=]|[-+*/]=)")
        for i in range(here - 1, -1, -1):
            # an assignment nested deeper than the loss call (under an ``if``) may not have run: not named
            if pat.match(lines[i]) and len(lines[i]) - len(lines[i].lstrip()) <= depth:
                return f"{short_location(frame.f_code.co_filename, first + i)} ({lines[i].strip()[:80]})"
    return None


def _label_smoothing(args: tuple, kwargs: dict) -> float:
    # cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    v = kwargs.get("label_smoothing", args[7] if len(args) > 7 else 0.0)
    return float(v) if isinstance(v, (int, float)) else 1.0


class LogitBoundChecks(Check):
    name = "logitbound"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.done: set[str] = set()
        self.made: dict[str, str | None] = {}  # loss site -> the user's line that made its bounded logits

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in _LOSSES or not inp.requires_grad or inp.grad_fn is None:
            return
        if name == "binary_cross_entropy_with_logits":
            if not target.is_floating_point() or target.shape != inp.shape:
                return
            classes = 2
        else:
            if target.is_floating_point() or inp.dim() < 2 or inp.shape[1] < 2:
                return
            if name == "cross_entropy" and _label_smoothing(args, kwargs) != 0.0:
                return
            classes = int(inp.shape[1])
        node = inp.grad_fn
        if type(node).__name__ not in _FIRST:  # most losses' logits come out of a linear layer: nothing to walk
            return
        if name == "nll_loss":
            if _kind(node) != "LogSoftmaxBackward0":
                return
            node = _inputs(node)[0]
        maker = bounded_maker(node)
        if maker is None:
            return
        site = self.s.losses.site() or f"F.{name}"
        if site in self.done:
            return
        if site not in self.made:
            self.made[site] = made_at(getattr(self.s.losses, "_frame", None), inp)
        x = inp.detach()
        if name == "nll_loss":  # log-probabilities of bounded logits: each row spans at most 2, like the logits
            top = (x.amax(1) - x.amin(1)).max().float() / 2
        else:
            top = x.abs().max().float()
        if name == "binary_cross_entropy_with_logits":
            t = target.detach()
            other = ((t != 0) & (t != 1)).sum().float()
        else:
            other = torch.zeros((), device=x.device)
        self.s.defer(torch.stack((top, other.to(top.device))),
                     self._judge(name, site, maker, classes, tuple(inp.shape), self.s.step))

    def _judge(self, name: str, site: str, maker: str, classes: int, shape: tuple, step: int):
        def callback(vals: list[float]) -> None:
            top, other = vals
            if site in self.done or not top <= _BOUND or other > 0:
                return
            self.done.add(site)
            self._report(name, site, maker, classes, shape, top, step)

        return callback

    def _report(self, name: str, site: str, maker: str, classes: int, shape: tuple, top: float, step: int) -> None:
        kinds = {"cosine": "dot products of L2-normalised vectors (cosine similarities)",
                 "tanh": "outputs of a tanh"}
        what = " and ".join(kinds.get(m, m) for m in maker.split("/"))
        if name == "binary_cross_entropy_with_logits":
            floor, best = math.log1p(math.exp(-1.0)), 1 / (1 + math.exp(-1.0))
            floor_txt = (f"its loss cannot fall below log(1 + e^-1) = {floor:.3f} per element (no predicted "
                         f"probability beyond {1 - best:.2f}-{best:.2f})")
        else:
            floor = math.log1p((classes - 1) * math.exp(-2.0))
            best = 1 / (1 + (classes - 1) * math.exp(-2.0))
            floor_txt = (f"with {classes} classes its loss cannot fall below log(1 + {classes - 1}·e^-2) = "
                         f"{floor:.2f} (uniform guessing: log {classes} = {math.log(classes):.2f}; the right "
                         f"class's probability never above {best:.2f})")
        made = self.made.get(site)
        given = "the log-probabilities given to" if name == "nll_loss" else "the logits given to"
        seen = (f"the widest row of log-probabilities spans {2 * top:.3f}" if name == "nll_loss"
                else f"largest |logit| seen {top:.3f}")
        msg = (f"{given} F.{name} at {site} (shape {list(shape)}" + (f", made at {made}" if made else "")
               + f") come from logits bounded by construction: they are {what}, so every logit lies in [-1, 1] "
               f"({seen}) and {floor_txt}. The loss cannot reach its minimum however good the model gets: the "
               "soft-max stays nearly flat, the gradient that separates the classes is weak, and the model learns "
               "slowly while the loss looks like it trains (InfoNCE/NT-Xent without its temperature, a cosine "
               "classifier without its scale).")
        fix = ("divide the similarities by a temperature before the loss (logits = cos / tau, tau about 0.05-0.2, "
               "as InfoNCE/NT-Xent define it) or multiply them by a scale, fixed or learnable (NormFace/ArcFace's "
               "s about 16-64, CLIP's logit_scale.exp() * cos)")
        self.s.report("logits-bounded", msg, where=f"F.{name} call at {site}", fix=fix, key=site)
