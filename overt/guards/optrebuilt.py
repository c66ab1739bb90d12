"""Guard on an optimizer whose state is thrown away during the run (slug ``optimizer-state-discarded``;
issue 33).

An invariant of every program that trains one set of weights with a stateful optimizer (Adam's moments
and step count, SGD's momentum buffers, RMSprop's squares): the state follows the weights through the run.
An optimizer built anew over the same parameters -- inside the epoch loop, inside a ``train_epoch()``
helper, beside a scheduler rebuilt with it -- starts again from empty moments and step 0, so every epoch
opens with Adam's bias-corrected first steps (about ``lr`` per weight, in the sign of the gradient) and
training never settles (alan-turing-institute/deepsensor#47).

What is proven, at ``Optimizer.__init__`` only (patched under ``overt run``; nothing runs per step):

- the new optimizer holds exactly the parameter tensors of an earlier optimizer of the same class that
  has taken steps in this session (the session saw them) and holds state for them now (a stateless
  optimizer -- SGD without momentum -- loses nothing by a rebuild and is never named);
- the weights were not put back to where that earlier optimizer began (a few values of the first and the
  last parameter, read once per construction, differ from those read when it was built): a trial run
  that restores its weights and starts over (a learning-rate finder, a batch-size search) is not a discard;
- it is the second such discard of the same parameters or later: one rebuild (fine-tuning that unfreezes
  and rebuilds once, a second stage with another rate) is a design choice, a rebuild at every epoch
  boundary is not.  Unfreezing changes the parameter set, and a fresh model per cross-validation fold
  brings fresh parameter tensors: neither is the same parameters.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from overt.guards.check import Check

DISCARDS = 2  # discards of one parameter set's optimizer state before it is named
_SAMPLE = 4  # values read per sampled parameter at construction
_KEEP = 32  # construction records kept


def _params(opt: Any) -> list[torch.Tensor]:
    return [p for g in getattr(opt, "param_groups", ()) for p in g.get("params", ())
            if isinstance(p, torch.Tensor)]


def _sample(params: list[torch.Tensor]) -> tuple[float, ...] | None:
    """A few values of the first and the last parameter (one host read, at construction only)."""
    try:
        with torch.no_grad():
            parts = [p.detach().reshape(-1)[:_SAMPLE].float().cpu() for p in (params[0], params[-1])]
        return tuple(torch.cat(parts).tolist())
    except Exception:  # noqa: BLE001  a meta or sharded tensor: nothing to compare
        return None


class _Built:
    __slots__ = ("opt", "cls", "ids", "refs", "sample", "where", "discards", "lines")

    def __init__(self, opt: Any, params: list[torch.Tensor], where: str | None) -> None:
        self.opt = weakref.ref(opt)
        self.cls = type(opt)
        self.ids = frozenset(id(p) for p in params)
        self.refs = [weakref.ref(p) for p in params[:1] + params[-1:]]
        self.sample = _sample(params)
        self.where = where
        self.discards = 0  # discards of this parameter set's state before this optimizer was built
        self.lines: list[str] = []  # where the optimizers whose state was discarded were built


class OptimizerRebuilt(Check):
    name = "optrebuilt"

    def __init__(self, session):
        super().__init__(session)
        self.built_list: list[_Built] = []

    def built(self, opt: Any, where: str | None) -> None:
        """``Optimizer.__init__`` returned (patched in :mod:`overt.guards.patches`)."""
        params = _params(opt)
        if not params:
            return
        rec = _Built(opt, params, where)
        earlier = self._discarded(rec, params)
        self.built_list = [b for b in self.built_list if b.opt() is not None and b.opt() is not opt][-_KEEP:]
        self.built_list.append(rec)
        if earlier is None:
            return
        rec.discards = earlier.discards + 1
        rec.lines = earlier.lines + [earlier.where or "?"]
        if rec.discards >= DISCARDS:
            self._report(rec, earlier)

    def _discarded(self, rec: _Built, params: list[torch.Tensor]) -> _Built | None:
        """The latest earlier optimizer of the same class over exactly these parameters that took steps,
        holds state now and began from other weights than these (None if there is none)."""
        for old in reversed(self.built_list):
            prev = old.opt()
            if prev is None or old.cls is not rec.cls or old.ids != rec.ids:
                continue
            if any(r() is not p for r, p in zip(old.refs, params[:1] + params[-1:])):
                continue  # ids reused by other tensors
            info = self.s.optimizers.get(id(prev))
            if info is None or info.opt is not prev or info.steps < 1 or not len(prev.state):
                return None  # the latest one never stepped or holds nothing: nothing was lost
            if old.sample is None or rec.sample is None or old.sample == rec.sample:
                return None  # the weights were put back where it began: a trial run restarted
            return old
        return None

    def _report(self, rec: _Built, earlier: _Built) -> None:
        name = rec.cls.__name__
        where = rec.where or "?"
        held = sorted({k for st in list(earlier.opt().state.values())[:8] if isinstance(st, dict)
                       for k in st})
        state = ", ".join(held[:4]) or "its state"
        n = len(rec.ids)
        self.s.report(
            "optimizer-state-discarded",
            f"a new {name} was built at {where} over the same {n} parameter tensors as the {name} built before "
            f"it, which had taken steps and held state for them ({state}): {rec.discards + 1} {name}s have now been "
            f"built over these weights (at {', '.join(dict.fromkeys(rec.lines + [where]))}), and each "
            f"rebuild throws the moments and the step count away, so training restarts from the optimizer's "
            f"first steps every time (Adam's bias-corrected first steps move every weight by about lr) and "
            f"does not settle.",
            fix=f"build the {name} once, before the epoch loop, and pass it to the function that trains an "
            "epoch; change its rate through a scheduler or param_group['lr'] instead of building a new one; "
            "when resuming, load its state_dict",
            where=where, key=where,
        )
