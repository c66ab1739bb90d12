"""Guard on a learning rate written by hand that the scheduler overwrites (slug ``lr-overwritten-by-scheduler``).

``LambdaLR`` (every Hugging Face ``get_*_schedule`` is one), ``OneCycleLR`` and ``CyclicLR`` compute
each step's rate from their own ``base_lrs`` (the groups' ``initial_lr``), not from the rate the group
holds.  A rate written into ``optimizer.param_groups[i]["lr"]`` after the scheduler exists -- a new
learning rate for a resumed run (AnswerDotAI/ModernBERT#124), a manual decay at some epoch, a rate
"fixed" after the scheduler was built -- is thrown away by the scheduler's next ``step()``: training
goes on with the old schedule and nothing says so.

Seen in the patched ``LRScheduler.step`` (no device work; a few float comparisons per scheduler step):
before the step, a group whose ``lr`` differs from the rate the scheduler itself set last
(``_last_lr``) was written by someone else.  The write is reported as lost when the scheduler is one
of the kinds above, the next scheduler step finds the group back at the scheduler's own rate (the
write was made once, not repeated before every step: a loop that sets the rate itself at every step
wins over the scheduler and is left alone), and no other scheduler holds the optimizer (warm-up plus
``ReduceLROnPlateau``, ``SequentialLR``'s children: rates written by another scheduler).  Tensor
learning rates are not read.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from torch.optim import lr_scheduler as L

from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

#: schedulers whose rate is a function of their base rates and step count alone (a written rate is lost)
FROM_BASE = tuple(c for c in (L.LambdaLR, getattr(L, "OneCycleLR", None), getattr(L, "CyclicLR", None)) if c)


def _foreign(sched: Any) -> list[tuple[int, float, float]]:
    """Groups whose rate is not the one ``sched`` set last: (group, rate now, scheduler's rate)."""
    last = sched.__dict__.get("_last_lr")
    groups = getattr(getattr(sched, "optimizer", None), "param_groups", None)
    if not last or not groups or len(last) != len(groups):
        return []
    out = []
    for i, (g, mine) in enumerate(zip(groups, last)):
        lr = g.get("lr")
        if type(lr) is float and type(mine) is float and lr != mine:
            out.append((i, lr, mine))
    return out


class LrWrites:
    """Per session: the written rates waiting for their scheduler's next step."""

    def __init__(self, session: GuardSession):
        self.s = session
        self.pending: dict[int, tuple[list[tuple[int, float, float]], list[float], str]] = {}
        self.fought: set[int] = set()  # schedulers whose rate is written before every step: left alone
        self.reported: set[int] = set()

    def before(self, sched: Any) -> None:
        if not isinstance(sched, FROM_BASE) or id(sched) in self.fought or id(sched) in self.reported:
            return
        written = _foreign(sched)
        earlier = self.pending.pop(id(sched), None)
        if earlier is not None:
            if written:  # written again before this step: a loop that sets the rate itself
                self.fought.add(id(sched))
                return
            self._lost(sched, *earlier)
            return
        if written:
            self.pending[id(sched)] = (written, [], user_location(2) or "")

    def after(self, sched: Any) -> None:
        entry = self.pending.get(id(sched))
        if entry is not None and not entry[1]:
            groups = sched.optimizer.param_groups
            entry[1].extend(float(groups[i]["lr"]) for i, _, _ in entry[0])

    def _lost(self, sched: Any, written: list[tuple[int, float, float]], after: list[float], where: str) -> None:
        opt = sched.optimizer
        if _other_scheduler(sched, opt):
            self.fought.add(id(sched))
            return
        self.reported.add(id(sched))
        i, lr, mine = written[0]
        now = after[0] if after else float(opt.param_groups[i]["lr"])
        name = type(sched).__name__
        base = getattr(sched, "base_lrs", [None] * (i + 1))[i]
        groups = f"param group {i}" if len(written) == 1 else f"{len(written)} param groups (e.g. group {i})"
        self.s.report(
            "lr-overwritten-by-scheduler",
            f"the learning rate of {groups} of {type(opt).__name__} was set to {lr:.3g} by hand, and "
            f"{name}.step() replaced it with {now:.3g}: {name} computes each step's rate from its own base rate "
            f"({base:.3g}) and step count, not from the rate the group holds, so the written rate held for one "
            "scheduler step and the run went back to the old schedule.",
            fix=f"change the schedule, not the group: build the scheduler after setting the rate (a new {name}, "
            "or set 'initial_lr' too and update scheduler.base_lrs), e.g. for g in opt.param_groups: "
            "g['lr'] = g['initial_lr'] = new_lr; scheduler.base_lrs = [new_lr] * len(opt.param_groups)",
            where=f"{name}.step() at {where or '?'}", key=f"lr-write:{id(sched)}",
        )


def _other_scheduler(sched: Any, opt: Any) -> bool:
    """Whether an object other than ``sched`` that looks like a scheduler holds ``opt`` (read once,
    when a lost write is about to be reported)."""
    for ref in gc.get_referrers(opt):
        owner = None
        if isinstance(ref, dict):  # an instance's __dict__
            for obj in gc.get_referrers(ref):
                if getattr(obj, "__dict__", None) is ref:
                    owner = obj
                    break
        else:
            owner = ref
        if owner is None or owner is sched:
            continue
        if getattr(owner, "optimizer", None) is opt and callable(getattr(owner, "step", None)) \
                and (isinstance(owner, L.LRScheduler) or hasattr(owner, "base_lrs") or hasattr(owner, "patience")):
            return True
    return False
