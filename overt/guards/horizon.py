"""Guard on a cosine schedule stepped past its own horizon (slug ``schedule-past-horizon``; issue 33,
round twelve's w278).

Premise: a learning-rate schedule that anneals to a floor is declared over the steps the program
runs, so over one run it reaches its floor at the end, not before.  ``CosineAnnealingLR(opt,
T_max)`` is a half cosine of ``T_max`` scheduler steps; stepped further it does not stay at
``eta_min`` but climbs back along the same cosine (its period is ``2 * T_max``), so a horizon
shorter than the run -- ``T_max = total_steps - warmup_steps`` with no warm-up ever run, ``T_max``
in epochs while the scheduler steps every batch, a horizon computed from another loader -- gives a
run whose learning rate reaches its floor part-way and then rises again, undoing the annealing
just when the model should settle.

Seen when the run ends (``end_of_run``, nothing on any step): for every ``CosineAnnealingLR`` the
session saw step (through the patched ``LRScheduler.step``), the scheduler's own count
``last_epoch`` is compared with its ``T_max``; reported when it went past it by at least
:data:`OVER` of ``T_max`` (the rate is then back above 14% of its range), the scheduler anneals
(``base_lr > eta_min`` in a group), its optimizer stepped (:data:`MIN_STEPS` steps or more) and no
``scheduler-cadence`` finding already named that scheduler.  ``CosineAnnealingWarmRestarts`` (restarts
on purpose), a cosine inside ``SequentialLR`` (counted from its milestone), a run ending at or within
:data:`OVER` past ``T_max`` (an extra step at the end): silent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from torch.optim import lr_scheduler as L

from overt.guards.aside import as_user
from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

OVER = 0.25  # scheduler steps past T_max, as a fraction of T_max, before the schedule is judged overrun
MIN_T = 4  # shorter horizons are not judged
MIN_STEPS = 4  # optimizer steps the run must have made
GRID = 64  # points at which a LambdaLR's function is read over the steps it was stepped
FLOOR = 0.02  # a factor at most this fraction of the function's peak is its floor
JUMP = 0.3  # a change between two grid points larger than this fraction of the peak is a restart
RISEN = 0.14  # a rise back above this fraction of the peak (a cosine 25% past its horizon) is a rise


def overrun(last_epoch: int, t_max: int) -> bool:
    """Whether a cosine of horizon ``t_max`` stepped ``last_epoch`` times went clearly past its floor."""
    return t_max >= MIN_T and last_epoch >= t_max * (1 + OVER)


def shape(values: list[float], ks: list[int]) -> tuple[str, int] | None:
    """How the factors ``values`` (read at the steps ``ks``, the last one the scheduler's last step) break
    "the floor comes at the end": ("zero", k) held at a floor of zero from step k on, ("rise", k) reached
    its floor at k and climbed back smoothly; None when the premise is not broken or cannot be proven."""
    top = max(values)
    if top <= 0 or min(values) < 0:
        return None
    floor = FLOOR * top
    peak = values.index(top)  # a warm-up may start from zero: the floor that counts comes after the peak
    first = min(range(peak, len(values)), key=values.__getitem__)  # the first lowest point after the peak
    if values[first] > floor or ks[first] * (1 + OVER) > ks[-1]:
        return None  # the floor is not reached, or reached near the end: the run ends annealed
    if any(b > a + 1e-12 for a, b in zip(values[peak:first], values[peak + 1:first + 1])):
        return None  # not one decay from a peak to the floor (a cyclic schedule, a start from the floor)
    tail = values[first:]
    if any(abs(b - a) > JUMP * top for a, b in zip(tail, tail[1:])):
        return None  # a jump: a restart on purpose
    if all(v == 0 for v in tail):
        return ("zero", ks[first])
    if min(tail) <= floor and tail[-1] >= RISEN * top and all(b >= a - 1e-12 for a, b in zip(
            tail[:len(tail) // 2], tail[1:len(tail) // 2 + 1])):
        return ("rise", ks[first])
    return None


def _anneals(sc: Any) -> bool:
    eta = getattr(sc, "eta_min", None)
    bases = getattr(sc, "base_lrs", None)
    if not isinstance(eta, (int, float)) or not bases:
        return False
    return any(isinstance(b, (int, float)) and b > eta * (1 + 1e-6) + 1e-12 for b in bases)


class HorizonChecks(Check):
    """Reads the schedulers :class:`~overt.guards.schedulers.SchedulerChecks` saw step, at the end."""

    name = "horizon"

    def __init__(self, session: GuardSession):
        super().__init__(session)

    def end_of_run(self) -> None:
        for entry in list(self.s.scheds.any_sched):
            sc, opt = entry[0], entry[1]
            if type(sc) in (L.LambdaLR, L.PolynomialLR):
                self._factors(sc, opt)
            if type(sc) is not L.CosineAnnealingLR:  # a subclass may redefine the curve
                continue
            t_max, last = getattr(sc, "T_max", None), getattr(sc, "last_epoch", None)
            if not isinstance(t_max, int) or not isinstance(last, int) or not overrun(last, t_max):
                continue
            oi = self.s.optimizers.get(id(opt))
            if oi is None or oi.steps < MIN_STEPS or not _anneals(sc):
                continue
            name = type(sc).__name__
            if self.s.reporter.has("scheduler-cadence", name) or self.s.reporter.has(
                    "scheduler-optimizer-idle", f"idle:{id(sc)}"):
                continue
            self._report(sc, oi, t_max, last)

    def _factors(self, sc: Any, opt: Any) -> None:
        """A LambdaLR whose function (every group's), read over the steps it was stepped, reaches its floor
        before the run ends and then rises again or stays at zero; a PolynomialLR past its total_iters."""
        last = getattr(sc, "last_epoch", None)
        oi = self.s.optimizers.get(id(opt))
        if not isinstance(last, int) or last < 2 * MIN_T or oi is None or oi.steps < MIN_STEPS:
            return
        name = type(sc).__name__
        if self.s.reporter.has("scheduler-cadence", name) or self.s.reporter.has(
                "scheduler-optimizer-idle", f"idle:{id(sc)}"):
            return
        ks = sorted({round(i * last / GRID) for i in range(GRID + 1)})
        if isinstance(sc, L.PolynomialLR):
            total, power = getattr(sc, "total_iters", None), getattr(sc, "power", None)
            if not isinstance(total, int) or not isinstance(power, (int, float)) or total < MIN_T or power <= 0:
                return
            found = [("zero", total)] if overrun(last, total) else []
            what = f"PolynomialLR(total_iters={total})"
        else:
            fns = list(getattr(sc, "lr_lambdas", ()))
            if not fns:
                return
            found = []
            for fn in fns:
                try:
                    values = [as_user(fn, k) for k in ks]
                except Exception:  # noqa: BLE001 - the user's function: whatever it does, nothing is proven
                    return
                if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                    return  # a tensor (reading it could synchronise) or anything else: nothing proven
                got = shape([float(v) for v in values], ks)
                if got is None:
                    return  # every group's schedule must break the premise (a group frozen later on purpose)
                found.append(got)
            what = "the LambdaLR's function"
        kind, at = found[0]
        site = self.s.scheds.sites.get(id(sc), "")
        where = f"{name} on {oi.name}" + (f", first stepped at {site}" if site else "")
        if kind == "zero":
            effect = (f"reaches 0 at scheduler step {at} and stays there for the last {last - at} of the {last} steps "
                      "this run stepped it: the model stops training long before the run ends")
        else:
            effect = (f"reaches its floor at scheduler step {at} of the {last} steps this run stepped it, then "
                      "climbs back (a cosine read past its horizon), so the run trains at a rising learning rate when "
                      "it should be settling")
        self.s.report(
            "schedule-past-horizon",
            f"the learning rate of {oi.name} set by {what} {effect}. The schedule's horizon (the number of training "
            f"steps it was given) is shorter than the {last} times it is stepped.",
            fix="give the schedule the number of times it is stepped over the whole run: num_training_steps = "
            "epochs * len(loader) // grad_accumulation when it is stepped after each optimizer step (and step it "
            "there, not after every micro-batch).",
            where=where, key=f"horizon:{id(sc)}",
        )

    def _where(self, sc: Any, t_max: int, opt: str) -> str:
        site = self.s.scheds.sites.get(id(sc), "")
        what = f"CosineAnnealingLR(T_max={t_max}) on {opt}"
        return f"{what}, first stepped at {site}" if site else what

    def _report(self, sc: Any, oi: Any, t_max: int, last: int) -> None:
        base, eta = float(sc.base_lrs[0]), float(sc.eta_min)
        now = eta + (base - eta) * (1 + math.cos(math.pi * last / t_max)) / 2
        floors = (last + t_max) // (2 * t_max)  # times the cosine touched eta_min
        peak = last >= 2 * t_max
        shape = (f"reached its floor {eta:.3g} at scheduler step {t_max}, then climbed back"
                 + (f" to {base:.3g} at step {2 * t_max}" if peak else "")
                 + (f" and went down and up {floors} time(s) in all" if floors > 1 else "")
                 + f"; it ended at {now:.3g}")
        self.s.report(
            "schedule-past-horizon",
            f"CosineAnnealingLR(T_max={t_max}) of {oi.name} was stepped {last} times in this run ({oi.steps} "
            f"optimizer steps): its learning rate {shape}. A cosine schedule is a half period of T_max steps; "
            "past T_max it does not stay at eta_min but rises again, so the run trains at a rising learning rate "
            "when it should be settling, and the final weights are not the annealed ones.",
            fix="give T_max the number of times the scheduler is stepped over the whole run (total optimizer "
            "steps when it steps every batch, minus the warm-up steps only where a warm-up scheduler runs first, "
            "e.g. SequentialLR([LinearLR(...), CosineAnnealingLR(opt, T_max=total - warmup)], [warmup])).",
            where=self._where(sc, t_max, oi.name), key=f"horizon:{id(sc)}",
        )
