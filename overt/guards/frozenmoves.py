"""Guard on parameters meant to stay frozen that the optimizer still moves (slug ``frozen-params-moved``).

A program says a parameter (or part of one) must not change in two ways, and the optimizer can
still move it in both:

* **requires_grad=False on a parameter the optimizer holds, with a gradient tensor left on it**
  (frozen after a backward, gradients reset with ``zero_grad(set_to_none=False)`` or
  ``p.grad.zero_()``).  ``torch.optim`` skips only parameters whose ``grad`` is ``None``: with a
  zero-filled gradient the step still applies weight decay, momentum and the Adam moments of the
  earlier steps.  Judged on one checked step: the parameter's float64 sum and sum of squares
  before and after ``step()``, when its gradient is all zero (a non-zero gradient on a parameter
  without ``requires_grad`` was put there by hand -- evolution strategies, manually computed
  gradients -- and is stepped on purpose).
* **gradient elements set to zero after backward** (``emb.weight.grad[keep] = 0``,
  ``p.grad.mul_(mask)``: textual inversion, pruning masks, partial freezing).  A zero gradient does
  not stop decoupled weight decay (AdamW) nor momentum built before the masking.  Proven in
  stages, each on a later checked step, so that an ordinary program pays nothing: a gradient
  edited in place or replaced after backward (host metadata, the version counters
  :class:`~overt.guards.grads.GradChecks` records) makes the parameter a candidate; on the next
  checked step its count of non-zero gradient elements is taken at the end of backward and again
  before the step (clipping and unscaling rescale, they do not zero: the count drops only where
  elements were zeroed); where it dropped, the next checked step records which elements were
  zeroed after backward and the sums of their values, before and after the step; the one after
  compares.  Reported when those elements are still zero-gradient, the step moved them and they
  are not back where they were at the previous checked step (a program that writes the frozen rows
  back after each step -- the usual fix -- stays silent; so does one whose optimizer does not move
  them).

Gradients that backward itself leaves at zero (rows of an embedding no token of the batch used,
dead units) say nothing about intent and are never judged: Adam moving them is its documented
behaviour.  Steps with a closure are not judged (the gradients are made inside ``step()``).
Device values are read with the checked step's other deferred reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

#: a relative change of a float64 sum below this is rounding, not movement
_TOL = 1e-9

#: checked steps of counting without a zeroed element before a candidate is given up
_TRIES = 3

# what the end-of-backward hook records for a parameter (``_Track.want`` in grads.py)
COUNT, ZEROS = 1, 2


def _sums(p: torch.Tensor, where: torch.Tensor | None = None) -> torch.Tensor:
    """float64 sum and sum of squares of ``p`` (of its elements where ``where`` is True)."""
    x = p.detach()
    if where is not None:
        x = torch.where(where, x, torch.zeros((), dtype=x.dtype, device=x.device))
    x = x.double()
    return torch.stack([x.sum(), (x * x).sum()])


def _changed(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """1.0 where the float64 sums moved by more than rounding (a device scalar)."""
    rel = (after - before).abs() / before.abs().clamp_min(1e-300)
    return (rel > _TOL).any().double()


class _Masked:
    """One parameter's stage in the gradient-mask proof."""

    __slots__ = ("stage", "tries", "zeroed", "before", "moved", "step")

    def __init__(self) -> None:
        self.stage = 1  # 1 counting, 2 zeroing proven, -1 given up
        self.tries = 0  # counting steps with no element zeroed (clipping, unscaling: rescaled, not zeroed)
        self.zeroed: torch.Tensor | None = None  # elements zeroed after backward at the last recorded step
        self.before: torch.Tensor | None = None  # their sums before that step
        self.moved: torch.Tensor | None = None  # whether that step moved them (device scalar)
        self.step = 0


class FrozenMoveChecks(Check):
    name = "frozenmoves"

    def __init__(self, session):
        super().__init__(session)
        self.masked: dict[int, _Masked] = {}
        self.pending: list[tuple[Any, ...]] = []  # (kind, oi, p, ...) judged after the step

    # -- before the step ---------------------------------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self.pending = []
        if closure:
            return
        grads = getattr(self.s, "grads", None)
        tracks = grads.tracks if grads is not None else {}
        for p in oi.params:
            g = p.grad
            if g is None or g.is_sparse or not p.is_floating_point():
                continue
            if not p.requires_grad:
                flags = torch.stack([self._moment_nonzero(oi, p), g.ne(0).any().double()])
                self.pending.append(("frozen", oi, p, _sums(p), flags))
                continue
            tr = tracks.get(id(p))
            if tr is None or tr.acc is None:
                continue
            ref, version = tr.acc
            edited = ref() is not g or g._version != version
            st = self.masked.get(id(p))
            if st is None:
                if edited:  # a candidate: its counts are taken at the next checked step
                    st = self.masked[id(p)] = _Masked()
                    st.stage = 1
                    tr.want = COUNT
                continue
            bwd, tr.bwd = tr.bwd, None
            if st.stage == 1 and bwd is not None and bwd.dtype != torch.bool:
                self.s.defer((bwd - g.count_nonzero()).reshape(1), self._on_count(st, tr))
            elif st.stage == 2 and bwd is not None and bwd.dtype == torch.bool and bwd.shape == g.shape:
                zero = g.eq(0)
                self._compare(oi, p, st, zero)
                st.zeroed = zero & ~bwd
                st.before = _sums(p, st.zeroed)
                st.step = oi.steps
                self.pending.append(("masked", oi, p, st))

    def _on_count(self, st: _Masked, tr: Any):
        def callback(vals: list[float]) -> None:
            if vals and vals[0] > 0:  # elements backward made non-zero were zeroed before the step
                st.stage = 2
                tr.want = ZEROS
                return
            st.tries += 1
            if st.tries >= _TRIES:  # the edits rescale (clipping, unscaling): stop counting
                st.stage = -1
                tr.want = 0
        return callback

    def _compare(self, oi: OptInfo, p: torch.Tensor, st: _Masked, zero: torch.Tensor) -> None:
        """The elements zeroed after backward at the last recorded step: still zero-gradient now,
        moved by that step, and not back where they were?"""
        if st.zeroed is None or st.before is None or st.moved is None or st.zeroed.shape != zero.shape \
                or st.zeroed.device != zero.device:
            return
        kept = (st.zeroed & ~zero).logical_not().all().double()
        now = _sums(p, st.zeroed)
        ratio = now[1] / st.before[1].clamp_min(1e-300)  # their sum of squares, relative
        value = torch.stack([kept, st.moved, _changed(st.before, now), st.zeroed.sum().double(), ratio,
                             self._moment_nonzero(oi, p, st.zeroed)])
        self.s.defer(value, self._on_masked(oi, p, st.step, oi.steps))

    # -- after the step ----------------------------------------------------------------
    def after_checked_step(self, oi: OptInfo) -> None:
        pending, self.pending = self.pending, []
        frozen = [(item[2], item[3], item[4]) for item in pending if item[0] == "frozen"]
        if frozen:  # one read for every frozen parameter: (moved, first moment non-zero, gradient non-zero) each
            value = torch.cat([torch.cat([_changed(before, _sums(p)).reshape(1), flags])
                               for p, before, flags in frozen])
            self.s.defer(value, self._on_frozen(oi, [p for p, _, _ in frozen]))
        for item in pending:
            p = item[2]
            if item[0] == "masked":
                st = item[3]
                if st.zeroed is not None and st.before is not None:
                    st.moved = _changed(st.before, _sums(p, st.zeroed))

    # -- findings ----------------------------------------------------------------------
    @staticmethod
    def _moment(oi: OptInfo, p: torch.Tensor) -> tuple[str, torch.Tensor] | None:
        """The optimizer's first moment for ``p`` (SGD's momentum buffer, Adam's exp_avg), if any."""
        state = oi.opt.state.get(p)
        for key in ("momentum_buffer", "exp_avg"):
            t = state.get(key) if isinstance(state, dict) else None
            if isinstance(t, torch.Tensor) and t.shape == p.shape:
                return key, t
        return None

    def _moment_nonzero(self, oi: OptInfo, p: torch.Tensor, where: torch.Tensor | None = None) -> torch.Tensor:
        """1.0 when the optimizer's first moment for ``p`` is non-zero (where ``where``), else 0.0."""
        found = self._moment(oi, p)
        if found is None:
            return torch.zeros((), dtype=torch.float64, device=p.device)
        t = found[1].detach()
        nz = t.ne(0) if where is None else (t.ne(0) & where)
        return nz.any().double()

    def _cause(self, oi: OptInfo, p: torch.Tensor, moment: float, grad: float = 0.0) -> str:
        """What in ``oi`` moves ``p`` whatever its gradient: weight decay, a non-zero first
        moment (``moment``), the stale gradient itself (``grad``)."""
        group = next((g for g in oi.opt.param_groups if any(q is p for q in g["params"])), {})
        decay = group.get("weight_decay", 0) or 0
        parts = []
        if decay:
            parts.append(f"the weight decay of its param group (weight_decay={decay:g}, applied whatever the gradient)")
        found = self._moment(oi, p)
        if moment and found is not None:
            parts.append(f"the optimizer's {found[0]}, built from the gradients of earlier steps")
        if grad:
            parts.append("the stale gradient it still holds")
        return "; and ".join(parts) or f"{type(oi.opt).__name__}'s update rule"

    def _on_frozen(self, oi: OptInfo, params: list[torch.Tensor]):
        s = self.s
        where = user_location(1) or "?"
        step = s.step

        def callback(vals: list[float]) -> None:
            # a non-zero gradient on a parameter without requires_grad was put there by hand (evolution
            # strategies, zeroth-order or manually computed gradients, stepped on purpose): only a zero
            # gradient -- the tensor zero_grad(set_to_none=False) leaves -- proves a frozen parameter
            moved = [(p, vals[3 * i + 1], vals[3 * i + 2]) for i, p in enumerate(params)
                     if 3 * i + 2 < len(vals) and vals[3 * i] and not vals[3 * i + 2]]
            if not moved:
                return
            names = [s.name_of(p) for p, _, _ in moved]
            p, moment, grad = moved[0]
            cause = self._cause(oi, p, moment, grad)
            s.report(
                "frozen-params-moved",
                f"{len(moved)} parameter(s) with requires_grad=False ({first_names(names)}) are still held by "
                f"{oi.name} with a gradient tensor (zero_grad(set_to_none=False), a manual grad.zero_(), or frozen "
                f"after a backward), and {oi.name}.step() changed them at step {s.run_step(step)}. What moves "
                f"{names[0]}: {cause}. The parameters meant to stay frozen drift at every step.",
                fix="create the optimizer from the trainable parameters only, after freezing "
                "([p for p in model.parameters() if p.requires_grad]), or set the frozen parameters' .grad to None "
                "(zero_grad(set_to_none=True)) so that the optimizer skips them.",
                where=f"{oi.name}.step() at {where}", key=oi.name, step=step,
            )

        return callback

    def _on_masked(self, oi: OptInfo, p: torch.Tensor, a: int, b: int):
        s = self.s
        where = user_location(1) or "?"

        def callback(vals: list[float]) -> None:
            if len(vals) < 6:
                return
            kept, moved, drifted, count, ratio, moment = vals[:6]
            if not (kept and moved and drifted and count):
                return
            name = s.name_of(p)
            cause = self._cause(oi, p, moment)
            drift = f" (their sum of squares went from 1 to {ratio:.4g} between steps {a} and {b})"
            total = p.numel()
            s.report(
                "frozen-params-moved",
                f"{int(count)} of the {total} elements of {name} have their gradient set to zero after backward "
                f"-- meant to stay frozen -- but {oi.name}.step() still moves them{drift}. What moves them: "
                f"{cause}. None of this looks at the gradient, so the 'frozen' values drift at every step.",
                fix="freeze by structure, not by zeroing gradients: train the rows that should learn as a "
                "separate parameter, or give the frozen part a param group with weight_decay=0 and no momentum "
                "(or an optimizer without decay), or copy the frozen values back after each step "
                "(with torch.no_grad(): weight[frozen] = original[frozen]).",
                where=f"{name}.grad zeroed before {oi.name}.step() at {where}", key=f"{oi.name}:{name}",
                step=b,
            )

        return callback
