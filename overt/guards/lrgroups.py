"""Guard on a hand-written learning-rate schedule that reaches only some parameter groups (slug
``lr-schedule-skips-groups``).

A loop that sets the rate by hand must set it in every group: ``param_group["lr"] = lr`` written after
the ``for param_group in optimizer.param_groups:`` loop instead of inside it updates only the last
group (rasbt/LLMs-from-scratch#692), and ``optimizer.param_groups[0]["lr"] = lr`` only the first: the
other groups (the no-weight-decay group of biases and norms, a second model's parameters) train at
the constructor's rate for the whole run, with no warm-up and no decay.

Seen before checked steps (host floats, no device work), on optimizers no scheduler object drives,
with two or more groups: a group whose rate moved since the previous checked step (a schedule at
work; a rate set to 0 is a freeze and is left out) while another group's rate is still exactly the
optimizer's constructor rate (``defaults["lr"]``), as it has been at every checked step so far.  Two
checked steps with a move are needed.  Groups that carry keys of their own (``"scale"``, ``"lr_mult"``:
a per-group factor the hand-written loop applies, 1.0 for a group meant to keep its rate) are left
alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

_STANDARD = frozenset({"params", "initial_lr", "name", "param_names"})  # keys any group may carry
STRIKES = 2  # checked steps with a moving group while a group stays at the constructor's rate


class GroupsLeftBehind(Check):
    name = "lrgroups"

    def __init__(self, session):
        super().__init__(session)
        self.prev: dict[int, list[float]] = {}  # id(OptInfo) -> the rates at the previous checked step
        self.stuck: dict[int, set[int]] = {}  # groups at the constructor's rate at every checked step so far
        self.strikes: dict[int, int] = {}

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        scheds = getattr(self.s, "scheds", None)
        driven = scheds is not None and any(entry[1] is oi.opt for entry in scheds.any_sched)
        groups = oi.opt.param_groups
        base = oi.opt.defaults.get("lr") if isinstance(getattr(oi.opt, "defaults", None), dict) else None
        if len(groups) < 2 or type(base) is not float or base <= 0:
            return
        standard = set(oi.opt.defaults) | _STANDARD
        if any(set(g) - standard for g in groups):
            return  # groups with keys of their own (a per-group factor): the loop may treat them apart
        lrs = [g.get("lr") for g in groups]
        if not all(type(v) is float for v in lrs):
            return  # a tensor rate: reading it could synchronise
        at_base = {i for i, v in enumerate(lrs) if v == base}
        stuck = self.stuck.get(id(oi))
        stuck = at_base if stuck is None else stuck & at_base
        self.stuck[id(oi)] = stuck
        prev = self.prev.get(id(oi))
        self.prev[id(oi)] = lrs
        if prev is None or len(prev) != len(lrs) or driven:
            return
        moving = [i for i, (a, b) in enumerate(zip(prev, lrs)) if a != b and b != 0 and i not in stuck]
        if not moving or not stuck:  # (a schedule set once per epoch moves between some checked steps only)
            return
        self.strikes[id(oi)] = self.strikes.get(id(oi), 0) + 1
        if self.strikes[id(oi)] < STRIKES:
            return
        i = moving[0]
        left = sorted(stuck)
        names = ", ".join(str(j) for j in left[:4]) + (" ..." if len(left) > 4 else "")
        self.s.report(
            "lr-schedule-skips-groups",
            f"the learning rate of param group {i} of {oi.name} follows a schedule set by hand "
            f"({prev[i]:.3g} -> {lrs[i]:.3g} since the previous checked step), while group(s) {names} "
            f"({len(left)} of {len(lrs)}) "
            f"have kept the constructor's rate {base:.3g} at every checked step: the hand-written update reaches "
            "only some groups (param_groups[0]['lr'] = ..., or the assignment placed after the loop over "
            "optimizer.param_groups instead of inside it), so those parameters train with no warm-up and no "
            "decay.",
            fix="set the rate inside the loop over every group: for g in optimizer.param_groups: g['lr'] = lr "
            "(keeping a group's own factor as g['lr'] = lr * g.get('lr_scale', 1.0)).",
            where=f"{oi.name} param_groups[{i}]['lr']", key=f"groups:{oi.name}",
        )
