"""Guard on a positive-pair loss that trains both of its sides (slug ``stop-gradient-missing``; issue 33).

An invariant of self-supervised training without negatives (SimSiam, BYOL, their momentum and
predictor variants): the loss pulls a prediction towards a *target*, and the target side carries no
gradient into the parameters the optimizer updates -- it is detached (a stop-gradient) or computed by
a network that only an exponential moving average moves.  When both sides train the same
parameters, the cheapest way to make two views agree is to map every input to the same vector: the
representation collapses while the loss falls to its minimum.

Seen on checked steps, for ``F.cosine_similarity`` (``nn.CosineSimilarity``, ``torch.cosine_similarity``)
of two ``(N, D)`` tensors of the same shape (paired rows, not a similarity matrix), and for
``F.mse_loss`` of two such tensors whose rows are unit vectors (BYOL's ``2 - 2 cos``), with
``N >= MIN_BATCH`` and ``D >= 2``.  The
mechanism is read from autograd's graph on the host: both arguments require grad and each reaches a
parameter that a watched optimizer holds.  The effect on the device: the spread of the rows once
l2-normalised (the per-coordinate standard deviation over the batch times sqrt(D): about 1 when the
vectors spread over the sphere, 0 when they coincide; the SimSiam paper's collapse measure), for the
side that spreads more.  Reported, once per call site, when after the warm-up that spread is below
``COLLAPSED`` and below ``DROP`` times the first spread seen at the site: both sides train and the
outputs did collapse.  A site with a detached side, sides that reach no optimizer, or outputs that
keep their spread (a consistency term next to a supervised loss) stays silent; losses with negatives
(contrastive matrices, ``cosine_embedding_loss`` with -1 labels) are not looked at.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

MIN_BATCH = 8
COLLAPSED = 0.25  # spread of the normalised rows (1 = spread over the sphere, 0 = one vector)
DROP = 0.5  # and at most this share of the first spread seen at the site
UNIT_TOL = 1e-3  # mse_loss sides count as unit vectors when every row norm is within this of 1
MAX_NODES = 20000  # autograd nodes walked per side, at most


def reaches(t: torch.Tensor, wanted: set[int]) -> bool:
    """Whether ``t``'s autograd graph reaches a leaf tensor whose id is in ``wanted`` (host only)."""
    fn = t.grad_fn
    if fn is None:
        return t.requires_grad and id(t) in wanted
    seen = {fn}
    todo = [fn]
    while todo and len(seen) < MAX_NODES:
        node = todo.pop()
        var = getattr(node, "variable", None)  # AccumulateGrad: the leaf it accumulates into
        if var is not None and id(var) in wanted:
            return True
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _spread(x: torch.Tensor) -> torch.Tensor:
    z = torch.nn.functional.normalize(x.detach().float(), dim=-1)
    return z.std(0).mean() * math.sqrt(z.shape[-1])


class StopGradientChecks(Check):
    name = "stopgrad"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.first: dict[str, float] = {}  # call site -> the first spread seen there
        self.done: set[str] = set()

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name == "mse_loss":
            self.on_pair("F.mse_loss", inp, target, unit=True)

    def on_pair(self, what: str, a: Any, b: Any, unit: bool = False) -> None:
        """Two paired ``(N, D)`` sides of a positive-pair loss on a checked step."""
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            return
        if a.dim() != 2 or a.shape != b.shape or a.shape[0] < MIN_BATCH or a.shape[1] < 2:
            return
        if not (a.requires_grad and b.requires_grad) or not a.is_floating_point():
            return
        loc = user_location(2) or what
        if loc in self.done:
            return
        wanted = {id(p) for oi in self.s.optimizers.values() for p in oi.params}
        if not wanted or not reaches(a, wanted) or not reaches(b, wanted):
            return
        vals = [torch.maximum(_spread(a), _spread(b).to(a.device))]
        if unit:
            norms = torch.cat((a.detach().float().norm(dim=-1), b.detach().float().norm(dim=-1).to(a.device)))
            vals.append((norms - 1).abs().amax())
        after_warmup = self.s.step >= self.s.options.warmup_steps
        self.s.defer(torch.stack(vals), self._judge(what, loc, a.shape[1], unit, after_warmup))

    def _judge(self, what: str, loc: str, dim: int, unit: bool, after_warmup: bool):
        def callback(vals: list[float]) -> None:
            if loc in self.done or (unit and not vals[1] <= UNIT_TOL):
                return
            spread = vals[0]
            first = self.first.setdefault(loc, spread)
            if after_warmup and spread < COLLAPSED and spread < DROP * first:
                self.done.add(loc)
                self._report(what, loc, dim, first, spread)

        return callback

    def _report(self, what: str, loc: str, dim: int, first: float, spread: float) -> None:
        msg = (f"{what} at {loc} compares two outputs that both carry gradient into the parameters the optimizer "
               f"updates, and the outputs have collapsed: the spread of the l2-normalised {dim}-dimensional "
               f"outputs over the batch fell from {first:.2f} to {spread:.2f} (1 = spread over the sphere, "
               "0 = every input mapped to the same vector). A loss between two views with no negatives needs a "
               "stop-gradient on its target side (SimSiam, BYOL): trained through both sides, mapping every "
               "input to one vector minimises it, so the loss falls while the representation becomes useless.")
        fix = ("detach the target argument (e.g. -F.cosine_similarity(p1, z2.detach(), dim=-1)), or compute the "
               "targets with a momentum/EMA network under torch.no_grad() that no optimizer holds.")
        self.s.report("stop-gradient-missing", msg, where=f"{what} call at {loc}", fix=fix, key=loc)


def _wrapper(active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def cosine_similarity(x1: Any, x2: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling() or not active or not is_armed() or not torch.is_grad_enabled():
            return orig(x1, x2, *args, **kwargs)
        dim = kwargs.get("dim", args[0] if args else 1)
        if dim in (-1, 1):
            for s in active:
                if s.armed:
                    try:
                        s.stopgrad.on_pair("F.cosine_similarity", x1, x2)
                    except Exception as exc:  # never break the user's call over a check
                        s.check_failed(s.stopgrad, exc)
        return orig(x1, x2, *args, **kwargs)

    return cosine_similarity


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``F.cosine_similarity`` (what ``nn.CosineSimilarity`` calls) and ``torch.cosine_similarity`` (the
    same function) with ``patch(owner, name, make)``.  A name imported before the session started
    (``from torch.nn.functional import cosine_similarity``) keeps the original: those calls are not seen."""
    import torch.nn.functional as F

    patch(F, "cosine_similarity", functools.partial(_wrapper, active, is_armed))
    patch(torch, "cosine_similarity", functools.partial(_wrapper, active, is_armed))
