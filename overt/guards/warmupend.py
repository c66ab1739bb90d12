"""Guard on a learning-rate warm-up that has not ended when the run does (slug ``warmup-outlasts-run``; issue 33,
round seventeen's w388).

Premise: a schedule's rise (its warm-up) is declared over a part of the steps the program runs, so the run
reaches the schedule's peak and trains on from it (held, or decayed).  A ``LambdaLR`` whose function rose at
every step the run used it was given a warm-up as long as the run or longer: the warm-up and training step
counts swapped in a call to a linear warm-up-and-decay schedule (BERT_multimodal_transformer#22), a warm-up
counted in samples while the scheduler steps per batch, or in steps while it steps per epoch.  The run then ends
at the largest rate it ever had instead of annealed, and the weights it leaves are the noisiest.

Seen when the run ends (``end_of_run``, nothing on any step), from the schedule's own definition: for every
``LambdaLR`` the session saw step (the patched ``LRScheduler.step``), its function is read (as the user's code)
at :data:`GRID` + 1 points over the ``last_epoch`` steps it was stepped (the factors the run's steps used: step
``k`` used ``f(k)``).  Reported when, in every parameter group, the factor rose strictly from each point to the
next, ends the run positive and at least :data:`RISE` times its value at the run's middle; the scheduler was
stepped at least :data:`MIN_STEPS` times; its optimizer made the run's last steps (no other optimizer stepped
more) and still holds the rate this schedule gives at its last step (no later scheduler or hand-written rate
replaced it: a learning-rate range test followed by real training with the same optimizer is silent); the
scheduler is not part of a ``SequentialLR``/``ChainedScheduler`` (a warm-up piece there is cut at its milestone
by design).  Silent: a warm-up that ends within the run (linear, inverse square root, exponential), constant and
decaying schedules, a function that returns tensors or raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.optim import lr_scheduler as L

from overt.guards.aside import as_user
from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

GRID = 32  # points at which the function is read over the steps the run used
RISE = 1.5  # the factor at the run's last step is at least this multiple of the factor at its middle
MIN_STEPS = 20  # scheduler steps the run must have made
SAME = 1e-6  # relative tolerance of "the optimizer still holds the schedule's rate"


class WarmupEndChecks(Check):
    """Reads the schedulers :class:`~overt.guards.schedulers.SchedulerChecks` saw step, at the end."""

    name = "warmupend"

    def __init__(self, session: GuardSession):
        super().__init__(session)

    def end_of_run(self) -> None:
        entries = list(self.s.scheds.any_sched)
        nested: set[int] = set()
        for entry in entries:
            for inner in getattr(entry[0], "_schedulers", ()) or ():
                nested.add(id(inner))
        most = max((o.steps for o in self.s.optimizers.values()), default=0)
        for entry in entries:
            sc, opt = entry[0], entry[1]
            if type(sc) is not L.LambdaLR or id(sc) in nested:
                continue
            oi = self.s.optimizers.get(id(opt))
            last = getattr(sc, "last_epoch", None)
            if oi is None or not isinstance(last, int) or last < MIN_STEPS or oi.steps < most or oi.steps < MIN_STEPS:
                continue
            self._judge(sc, oi, last)

    def _judge(self, sc: Any, oi: Any, last: int) -> None:
        fns = list(getattr(sc, "lr_lambdas", ()))
        groups = list(getattr(sc.optimizer, "param_groups", ()))
        bases = list(getattr(sc, "base_lrs", ()))
        if not fns or len(fns) != len(groups) or len(bases) != len(groups):
            return
        used = last - 1  # the factor of the run's last step: the scheduler steps once more after it
        ks = sorted({round(i * used / GRID) for i in range(GRID + 1)})
        found = []
        for fn, group, base in zip(fns, groups, bases):
            try:
                values = [as_user(fn, k) for k in ks]
                after = as_user(fn, last)
            except Exception:  # noqa: BLE001 - the user's function: whatever it does, nothing is proven
                return
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values + [after]):
                return  # a tensor (reading it could synchronise) or anything else: nothing proven
            values = [float(v) for v in values]
            end, middle = values[-1], values[len(values) // 2]
            if end <= 0 or any(b <= a for a, b in zip(values, values[1:])) or end < RISE * middle:
                return  # not rising over the whole run: a warm-up that ended, a constant or decaying schedule
            lr = group.get("lr")
            if not isinstance(base, (int, float)) or not isinstance(lr, (int, float)) or \
                    abs(lr - base * float(after)) > SAME * max(abs(lr), abs(base * float(after)), 1e-30):
                return  # the optimizer's rate is no longer this schedule's: something set another
            found.append((values[0], end, base))
        start, end, base = found[0]
        site = self.s.scheds.sites.get(id(sc), "")
        where = f"LambdaLR on {oi.name}" + (f", first stepped at {site}" if site else "")
        self.s.report(
            "warmup-outlasts-run",
            f"the learning rate of {oi.name}, set by the LambdaLR's function, rose at every point of the {last} "
            f"steps this run stepped it, from {base * start:.3g} (factor {start:.3g}) to {base * end:.3g} (factor "
            f"{end:.3g}) at the run's last step: the warm-up lasts the whole run, so the schedule never holds or "
            "decays from its peak, and training ends at the largest rate it ever had instead of annealed. A "
            "warm-up and a total step count swapped in the call that builds the schedule, or a warm-up counted in "
            "other units than the scheduler's steps, does this.",
            fix="pass the warm-up length and the total number of scheduler steps in their places (warm-up = a small "
            "fraction of the total; total = the number of times the scheduler is stepped over the run), e.g. "
            "get_linear_schedule_with_warmup(opt, num_warmup_steps=int(0.1 * total), num_training_steps=total).",
            where=where, key=f"warmup:{id(sc)}",
        )
