"""Guard on gradients a backward wrote that a reset erases before any optimizer step used them (slug
``backward-discarded``; issue 33).

An invariant of correct training: a backward's gradients on an optimizer's parameters reach a step.  Between two
steps, every ``loss.backward()`` adds its gradients into ``.grad``; the next ``step()`` consumes them, and a
``zero_grad()`` after that step clears what was used.  A ``zero_grad()`` that erases gradients a backward
accumulated since the last step, with no step of any optimizer in between, throws that backward's training
signal away: gradient accumulation that steps only when its window fills leaves the micro-batches at the end of
an epoch to the next epoch's ``zero_grad()`` (torchseq#8: part of every epoch never trains).

*Proven, not assumed.*  Erased gradients are a finding only when

- they are the ones a backward wrote since the last step (the tensor and version counter backward's
  accumulation left: :mod:`overt.guards.grads` tracks them on checked steps), and the reset erased them (set
  them to None, replaced them or zeroed them in place) in ``Optimizer.zero_grad`` or ``Module.zero_grad``;
- no optimizer stepped between that backward and the reset (a GAN's generator backward that writes into the
  discriminator's gradients was used by the generator's step);
- the reset is not inside an optimizer's ``step()`` (LBFGS's and SAM's closures reset between their own
  evaluations) and no enabled ``GradScaler`` scaled a loss in the run (its skipped non-finite steps are a
  declared boundary);
- the erased gradients were finite and not all zero (a step skipped on purpose after an overflow is silent);
- and the backward that wrote them -- the same user call site, up to three frames of the user's code -- is one
  whose gradients this optimizer steps on at another time: the program's own training backward, not a probe (a
  Fisher or saliency backward, SAM's first pass, a gradient penalty) written elsewhere.

Cost: the reset wrappers are in place only while a checked step lasts (:func:`arm`); outside a discard they
read one flag.  The erased gradients' norms are queued as one device tensor and read with the step's other
deferred values.  Nothing runs on unchecked steps.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location, user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo

FRAMES = 3  # user frames that name a backward's call site
MAX_NORMS = 64  # erased gradients whose norms are read
MAX_PENDING = 16  # discards waiting for their backward to be seen feeding a step
_PAIRS: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, wrapper)
STATE = False  # what arm() last put in place (patches.refresh calls it only when the checked state changes)


def _site() -> tuple[tuple[str, int], ...] | None:
    """The user's call site of the running backward: up to :data:`FRAMES` frames of the user's code, innermost
    first (a helper that calls backward is told apart by its callers); None outside the user's code."""
    frame: Any = sys._getframe(2)
    out: list[tuple[str, int]] = []
    while frame is not None and len(out) < FRAMES:
        name = frame.f_code.co_filename
        if is_user_file(name):
            out.append((name, frame.f_lineno))
        frame = frame.f_back
    return tuple(out) or None


def _in_step() -> bool:
    """Whether an optimizer's ``step()`` is running on this thread (a closure's reset)."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "step" and isinstance(frame.f_locals.get("self"), torch.optim.Optimizer):
            return True
        frame = frame.f_back
    return False


class _Discard:
    """Gradients one reset erased: of one optimizer, written by backwards at one call site."""

    __slots__ = ("oi", "site", "where", "backwards", "count", "finite", "fed")

    def __init__(self, oi: OptInfo, site: tuple, where: str, backwards: int, count: int):
        self.oi = oi
        self.site = site
        self.where = where  # the reset's line
        self.backwards = backwards  # backwards at the site since the last step
        self.count = count  # parameters whose gradients were erased
        self.finite: bool | None = None  # the erased gradients finite and not all zero (read deferred)
        self.fed: int | None = None  # the step of this optimizer the same site's gradients were seen feeding


class WastedGradChecks(Check):
    name = "wastedgrad"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.backwards: dict[tuple, int] = {}  # call site -> backwards there since the window began
        self.pending: list[_Discard] = []

    # -- backward: where it was called ---------------------------------------------------------------
    def on_backward(self) -> None:
        grads = self.s.grads
        if self.s.engine_loop:
            return
        site = _site()
        if site is None:
            return
        grads.site_now = (site, self._steps())
        self.backwards[site] = self.backwards.get(site, 0) + 1

    def after_backward(self) -> None:
        self.s.grads.site_now = None  # a backward not called through the wrapper is not this one

    def after_checked_step(self, oi: OptInfo) -> None:
        if self.backwards:  # backwards are counted while a checked step lasts: from here to the next one's end
            self.backwards.clear()

    def _steps(self) -> int:
        return sum(o.steps for o in self.s.optimizers.values())

    # -- a reset -----------------------------------------------------------------------------------------
    def before_reset(self) -> list[tuple[Any, ...]] | None:
        """The gradients a backward wrote since the last step and that are still as it left them."""
        grads = self.s.grads
        if not grads.accumulated or self.s.engine_loop:
            return None
        intact = []
        for oi in self.s.optimizers.values():
            if not oi.armed:
                continue
            for p in oi.params:
                tr = grads.tracks.get(id(p))
                if tr is None or tr.acc is None or tr.site is None:
                    continue
                g = p.grad
                ref, version = tr.acc
                if g is None or ref() is not g or g._version != version:
                    continue
                intact.append((oi, p, g, version, tr.site))
        if not intact:
            grads.accumulated = False
            return None
        # their norms, before the reset zeroes them in place (zero_grad(set_to_none=False)): one device tensor
        device = intact[0][2].device
        rows = [i for i, row in enumerate(intact[:MAX_NORMS]) if row[2].device == device and not row[2].is_sparse]
        norms = torch.stack(torch._foreach_norm([intact[i][2].detach() for i in rows])).float() if rows else None
        return [intact, rows, norms]

    def after_reset(self, seen: list[Any], call: str = "zero_grad()") -> None:
        intact, rows, norms = seen
        erased = [(i, row) for i, row in enumerate(intact)
                  if row[1].grad is None or row[1].grad is not row[2] or row[2]._version != row[3]]
        if not erased or _in_step() or self._scaled():
            return
        steps = self._steps()
        groups: dict[tuple[int, tuple], list[int]] = {}
        owners: dict[tuple[int, tuple], Any] = {}
        for i, (oi, _p, _g, _v, (site, at)) in erased:
            if at != steps or isinstance(oi.opt, torch.optim.LBFGS):
                continue  # an optimizer stepped since that backward: its gradients were used
            key = (id(oi.opt), site)
            groups.setdefault(key, []).append(i)
            owners[key] = oi
        position = {row: n for n, row in enumerate(rows)}
        where = f"{call} at {user_location(1) or '?'}"
        for key, members in groups.items():
            oi = owners[key]
            if any(d.oi is oi and d.site == key[1] for d in self.pending) or len(self.pending) >= MAX_PENDING:
                continue
            if self.s.reporter.has("backward-discarded", oi.name):
                continue
            picked = [position[i] for i in members if i in position]
            if norms is None or not picked:
                continue  # nothing readable of what was erased: nothing proven
            d = _Discard(oi, key[1], where, self.backwards.get(key[1], 0), len(members))
            self.pending.append(d)
            mine = norms[picked]
            self.s.defer(torch.stack((mine.isfinite().all().float(), mine.nan_to_num(0.0).max())), self._on_norms(d))

    def _scaled(self) -> bool:
        for ref in self.s.scalers.scalers:
            scaler = ref()
            if scaler is not None and scaler.is_enabled():
                return True
        return False

    def _on_norms(self, d: _Discard) -> Callable[[list[float]], None]:
        def callback(vals: list[float]) -> None:
            d.finite = vals[0] == 1.0 and vals[1] > 0.0
            if not d.finite:
                if d in self.pending:
                    self.pending.remove(d)
            else:
                self._judge(d)

        return callback

    # -- a step: the discarded site's gradients feed it ----------------------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        mine = [d for d in self.pending if d.oi is oi and d.fed is None]
        if not mine:
            return
        grads = self.s.grads
        sites = set()
        for p in oi.params:
            tr = grads.tracks.get(id(p))
            if tr is None or tr.acc is None or tr.site is None:
                continue
            g = p.grad
            ref, version = tr.acc
            if g is not None and ref() is g and g._version == version:
                sites.add(tr.site[0])
        for d in mine:
            if d.site in sites:
                d.fed = oi.steps
                self._judge(d)

    def _judge(self, d: _Discard) -> None:
        if not d.finite or d.fed is None:
            return
        if d in self.pending:
            self.pending.remove(d)
        oi = d.oi
        bw = short_location(*d.site[0])
        many = f"the {d.backwards} backward() calls" if d.backwards > 1 else "a backward() call"
        self.s.report(
            "backward-discarded",
            f"{d.where} erased the gradients that {many} at {bw} had written into {d.count} of "
            f"{oi.name}'s parameters since its last step, and no optimizer stepped on them: that backward is the "
            f"one whose gradients {oi.name} steps on at other times (step {self.s.run_step(d.fed)}), so the "
            "training signal of those batches is computed and thrown away. Gradient accumulation that steps only "
            "when its window fills leaves the last micro-batches of every epoch to the next epoch's zero_grad(): "
            "part of each epoch never trains, and the run makes fewer steps than it should.",
            fix="step on the gradients before resetting them: after the loop over an epoch's batches, "
            "`if micro_batches_since_step > 0: optimizer.step(); optimizer.zero_grad()` (or step on the last batch "
            "of the loader); reset gradients right after each step, not at the start of the next pass.",
            where=f"{d.where}; the backward at {bw}", key=oi.name,
        )

    def remove_hooks(self) -> None:
        self.pending.clear()
        self.backwards.clear()


# -- the wrappers of Optimizer.zero_grad and Module.zero_grad (checked steps only) --------------------------
def _wrapper(active: list, safely: Callable, orig: Any) -> Any:
    @functools.wraps(orig)
    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen = []
        for s in active:
            check = getattr(s, "wastedgrad", None)
            if s.armed and check is not None and not s.engine_loop and getattr(s, "grads", None) is not None \
                    and s.grads.accumulated:  # (the fast path: no backward accumulated since a scan found none)
                intact = safely(check.before_reset)
                if intact:
                    seen.append((check, intact))
        result = orig(self, *args, **kwargs)
        for check, intact in seen:
            oi = check.s.optimizers.get(id(self))
            safely(check.after_reset, intact, f"{oi.name if oi is not None else type(self).__name__}.zero_grad()")
        return result

    zero_grad.__overt_original__ = orig  # type: ignore[attr-defined]
    return zero_grad


def install(patch: Callable, active: list, safely: Callable) -> None:
    """Wrap ``Optimizer.zero_grad`` and ``Module.zero_grad`` with ``patch(owner, name, make)``; the wrappers
    stay in place only while a checked step lasts (:func:`arm`)."""
    _PAIRS.clear()
    for owner in (torch.optim.Optimizer, torch.nn.Module):
        patch(owner, "zero_grad", functools.partial(_wrapper, active, safely))
        wrap = owner.zero_grad
        orig = getattr(wrap, "__overt_original__", None)
        if orig is not None:
            _PAIRS.append((owner, "zero_grad", orig, wrap))
    arm(False)


def arm(on: bool) -> None:
    """Put the wrappers in place (a checked step) or the originals back (between checked steps: no cost)."""
    global STATE
    STATE = on
    for owner, name, orig, wrap in _PAIRS:
        current = owner.__dict__.get(name)
        if on and current is orig:
            setattr(owner, name, wrap)
        elif not on and current is wrap:
            setattr(owner, name, orig)


def uninstalled() -> None:
    """The originals are back (the last session ended): forget the pairs."""
    global STATE
    STATE = False
    _PAIRS.clear()
