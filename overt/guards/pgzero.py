"""Guard on a policy-gradient loss whose weights are zero on every sample (slug ``loss-term-constant``, widened;
issue 33, the wild corpus's w441 and w454).

Premise, one sentence: a policy-gradient loss -- a log-probability (or a probability ratio made from one)
multiplied by a per-sample advantage or reward that carries no gradient, and reduced -- trains the policy
only where that multiplier is not zero, so in every correct program the multiplier is non-zero on some
sample of some step over a long stretch of training.

A multiplier that is exactly zero on every element of every checked step is zero by construction: a
baseline equal to the reward it is subtracted from (a group mean over groups of one completion, a value
copied from the return), or rewards that can never be earned (an answer compared with one character of
itself, a reward read at the wrong index).  The loss backwards, is logged (as 0), the optimizer steps on
gradients that are exactly zero, and the policy never moves.

What is observed, on checked training steps only (:mod:`overt.guards.termscale`'s wrapper of
``torch.autograd.backward`` hands it the root before the user's backward runs): the root's graph is walked
through reductions, reshapes, sign changes, sums of terms, element-wise minimum/maximum (PPO's clipped
objective) and products; a product (``MulBackward0``) of two tensors of which exactly one carries a gradient,
whose no-gradient factor has at least two elements and whose gradient factor reaches a ``log_softmax``, a ``log`` or
a ``logsumexp`` (``Categorical.log_prob``) within a few nodes, is a policy-gradient product.  Whether its
no-gradient factor has any non-zero element is queued with the step's deferred reads (no synchronisation of its own).

Reported at the backward's line when the same product (its position in the walk) was all zero on
:data:`SAME` probes spanning at least :data:`SPAN` optimizer steps and never non-zero on any probe.  Silent:
a multiplier non-zero on any probe (sparse rewards early in training are zero on some steps, not on all of
them), a scalar multiplier (a coefficient), a run too short to span the probes, a product whose gradient side
is not a log-probability.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

SAME = 5  # probes on which the multiplier must be all zero
SPAN = 200  # optimizer steps the probes must cover: sparse rewards at the start are normal
MAX_SITES = 4  # backward lines followed
MAX_WALK = 64  # nodes walked from the root looking for the products
MAX_PRODUCTS = 4  # products followed per backward
LOG_DEPTH = 10  # nodes searched below a product's gradient side for a log-probability
_PASS = frozenset((
    "NegBackward0", "MeanBackward0", "MeanBackward1", "SumBackward0", "SumBackward1", "MulBackward1",
    "DivBackward1", "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "SqueezeBackward0",
    "SqueezeBackward1", "SqueezeBackward2", "UnsqueezeBackward0", "AddBackward0", "SubBackward0",
    "MinimumBackward0", "MaximumBackward0", "MinBackward1", "MaxBackward1", "ExpandBackward0",
    "CloneBackward0", "ToCopyBackward0", "WhereBackward0",
))
_LOG = frozenset(("LogSoftmaxBackward0", "LogBackward0", "LogsumexpBackward0"))  # Categorical.log_prob: a logsumexp


class _Site:
    __slots__ = ("zero", "live", "done")

    def __init__(self) -> None:
        self.zero: dict[int, list[int]] = {}  # product index -> steps it was all zero
        self.live: set[int] = set()  # product indices seen non-zero
        self.done = False


class PolicyZeroChecks(Check):
    name = "pgzero"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.sites: dict[str, _Site] = {}

    def on_backward(self, tensors: Any) -> None:
        """Find the policy-gradient products of a checked step's loss and queue whether their weights are zero."""
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1 or tensors.grad_fn is None:
            return
        loc = user_location(2) or "the backward call"
        site = self.sites.get(loc)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                return
            site = self.sites[loc] = _Site()
        if site.done:
            return
        weights = _products(tensors.grad_fn)
        idx = [i for i in range(len(weights)) if i not in site.live]
        if not idx:
            if weights:
                site.done = True
            return
        flags = torch.stack([(weights[i].detach() != 0).any().float().to(tensors.device) for i in idx])
        step = self.s.step
        self.s.defer(flags, lambda values: self._judge(site, loc, idx, step, values))

    def _judge(self, site: _Site, loc: str, idx: list[int], step: int, values: list[float]) -> None:
        if site.done:
            return
        for i, v in zip(idx, values):
            if v != 0:
                site.live.add(i)
                site.zero.pop(i, None)
                continue
            seen = site.zero.setdefault(i, [])
            if not seen or seen[-1] != step:
                seen.append(step)
            if len(seen) >= SAME and seen[-1] - seen[0] >= SPAN:
                site.done = True
                self._report(loc, seen)
                return

    def _report(self, loc: str, steps: list[int]) -> None:
        shown = ", ".join(str(s) for s in steps) if len(steps) <= 6 else \
            ", ".join(str(s) for s in steps[:5]) + f", ..., {steps[-1]}"
        msg = (f"The loss backwarded at {loc} multiplies a log-probability by a per-sample weight that carries no "
               f"gradient (an advantage, a reward, a target's probabilities), and that weight is exactly zero on every "
               f"sample at checked steps {shown}: the loss is 0 with a gradient of exactly 0, so the optimizer steps "
               "and the model never moves while the run looks normal. A weight that is zero by construction is "
               "usually a baseline equal to the reward it is subtracted from (a group mean over groups of one "
               "completion, a value that is the return itself), a reward that can never be earned (an answer "
               "compared with the wrong thing: one character of it, another sample's index), or a target "
               "distribution that lost all its mass.")
        fix = ("print the advantages and rewards of one step: with group-relative baselines sample at least two "
               "completions per prompt; check that a correct completion gets a non-zero reward.")
        self.s.report("loss-term-constant", msg, where=loc, fix=fix, key=loc)


def _products(root: Any) -> list[torch.Tensor]:
    """The no-gradient factors (two elements or more) of the policy-gradient products under ``root``."""
    out: list[torch.Tensor] = []
    seen = {root}
    todo = [root]
    walked = 0
    while todo and walked < MAX_WALK and len(out) < MAX_PRODUCTS:
        node = todo.pop(0)
        walked += 1
        kind = type(node).__name__
        nxt = [n for n, _ in node.next_functions]
        if kind == "MulBackward0" and len(nxt) == 2:
            if (nxt[0] is None) == (nxt[1] is None):
                continue  # both factors carry a gradient (or neither): not a weighted log-probability
            k = 1 if nxt[0] is None else 0  # the factor with a gradient
            weight = _saved(node, "_saved_self" if k == 1 else "_saved_other")
            if weight is not None and weight.numel() >= 2 and _reaches_log(nxt[k]):
                out.append(weight)
                continue
            following = [nxt[k]]
        elif kind == "DivBackward0" and len(nxt) == 2 and nxt[1] is None:
            following = [nxt[0]]  # a division by a count or a mask's sum
        elif kind in _PASS:
            following = nxt
        else:
            continue
        for n in following:
            if n is not None and n not in seen:
                seen.add(n)
                todo.append(n)
    return out


def _saved(node: Any, attr: str) -> torch.Tensor | None:
    try:
        value = getattr(node, attr)
    except Exception:  # noqa: BLE001  not saved, or freed
        return None
    return value if isinstance(value, torch.Tensor) and value.dtype.is_floating_point else None


def _reaches_log(node: Any) -> bool:
    """Whether a ``log_softmax``, ``log`` or ``logsumexp`` is within :data:`LOG_DEPTH` nodes below ``node``."""
    level = [node]
    seen = {node}
    for _ in range(LOG_DEPTH):
        nxt = []
        for n in level:
            if type(n).__name__ in _LOG:
                return True
            for m, _ in n.next_functions:
                if m is not None and m not in seen:
                    seen.add(m)
                    nxt.append(m)
        level = nxt
        if not level:
            return False
    return False
