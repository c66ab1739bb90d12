"""Guard on a moving average of the model that does not average (slug ``ema-decay-swapped``; issue 33).

An invariant of exponential moving averages of weights (an EMA model for evaluation, a mean
teacher, BYOL/MoCo momentum encoders, the soft-updated target networks of DDPG, TD3 and SAC): the
average lags the trained model.  An update ``ema = d * ema + (1 - d) * model`` moves it a fraction
``1 - d`` of the way (0.1% for d = 0.999); with ``d`` and ``1 - d`` swapped it moves 99.9% of the way
and the "average" is the trained model of one step ago: no smoothing, no stable target.

What is proven, on checked steps, for a watched model ``E`` that no optimizer holds and that has
exactly the parameter shapes of one trained model ``T`` (held by the optimizer that steps): a sample
of ``T``'s weights before a checked step (32 strided values of each of its first 64 parameters);
then, just before the next step of the same optimizer, the same elements of ``E`` and ``T``.  With
``a = |E - T|`` and ``b = |T - T_before|`` over the sample, an EMA that just took ``T`` in with decay
``d`` is ``a ~ d * (lag + b)``: ``a / b`` is at least about ``d`` for a working average and about
``1 - d`` for a swapped one.  Reported, once per pair, when after the warm-up at least
``MIN_SEEN`` such measurements all had ``0 < a < MAX_RATIO * b``: the copy moved almost all the way
to the trained model at every update.  An exact copy (``a == 0``: a hard sync, ``tau = 1``) is not
counted, nor a copy that lags (``a`` large: a working EMA, a target synced every few steps, a
frozen copy), nor a step that moved nothing (``b == 0``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.samples import weight_sample

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

MAX_PARAMS = 64
MAX_RATIO = 0.05  # the copy moved at least 95% of the way to the trained model
MIN_SEEN = 2


class EmaDecayChecks(Check):
    name = "emadecay"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.ratios: dict[tuple[int, int], list[float]] = {}  # (id(E info), id(T info)) -> a / b per measurement
        self.done: set[tuple[int, int]] = set()
        self.pending: dict[int, list[tuple]] = {}  # id(OptInfo) -> samples taken before its checked step
        self.handles: list[tuple[list[Any], list[bool]]] = []  # one-shot step pre-hooks (handle, fired)

    def _pairs(self, oi: OptInfo) -> list[tuple[ModelInfo, ModelInfo, list, list]]:
        """(E, T, E's params, T's params) for the trained models ``T`` that ``oi`` steps."""
        held = {id(p) for o in self.s.optimizers.values() for p in o.params}
        mine = {id(p) for p in oi.params}
        infos = list(self.s.models.values())
        params = {id(i): [p for p in i.module.parameters() if p.is_floating_point()][:MAX_PARAMS] for i in infos}
        trained = [i for i in infos if params[id(i)] and all(id(p) in mine for p in params[id(i)])]
        copies = [i for i in infos if params[id(i)] and not any(id(p) in held for p in params[id(i)])]
        out = []
        for e in copies:
            shapes = [p.shape for p in params[id(e)]]
            match = [t for t in trained if [p.shape for p in params[id(t)]] == shapes]
            if len(match) == 1 and (id(e), id(match[0])) not in self.done:
                out.append((e, match[0], params[id(e)], params[id(match[0])]))
        return out

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if self.s.step < self.s.options.warmup_steps or len(self.s.models) < 2:
            return  # (a pair is two models: a copy no optimizer holds and the model it follows)
        pairs = self._pairs(oi)
        if pairs:  # T before this step; E and T again just before the next one
            self.pending[id(oi)] = [(e, t, ep, tp, weight_sample(tp)) for e, t, ep, tp in pairs]

    def after_checked_step(self, oi: OptInfo) -> None:
        """Hooks are put on and taken off here, in the optimizer's post-hooks: torch iterates its dict of
        step pre-hooks while calling them, and a pre-hook that adds or removes one (a session that is
        itself such a hook, a one-shot hook removing itself beside another) breaks the user's step
        with "OrderedDict mutated during iteration"."""
        self._remove_fired()
        before = self.pending.pop(id(oi), None)
        if not before:
            return
        handle: list[Any] = []
        fired: list[bool] = []

        def next_step(_opt: Any, _args: tuple, _kwargs: dict) -> None:
            if fired:
                return  # taken off at the next checked step's end
            fired.append(True)
            try:
                for e, t, ep, tp, old in before:
                    now = weight_sample(tp)
                    vals = torch.stack(((weight_sample(ep).to(now.device) - now).norm(), (now - old).norm()))
                    self.s.defer(vals, self._judge(e, t))
            except Exception as exc:  # never break the user's step over a check
                self.s.check_failed(self, exc)

        handle.append(oi.opt.register_step_pre_hook(next_step))
        self.handles.append((handle, fired))

    def _remove_fired(self) -> None:
        keep = []
        for handle, fired in self.handles:
            if fired and handle:
                handle.pop().remove()
            elif handle:
                keep.append((handle, fired))
        self.handles = keep

    def _judge(self, e: ModelInfo, t: ModelInfo):
        key = (id(e), id(t))

        def callback(vals: list[float]) -> None:
            if key in self.done:
                return
            a, b = vals
            if not b > 0:
                return  # the trained model did not move: nothing to compare with
            ratio = a / b
            if not (0 < a and ratio < MAX_RATIO):
                self.done.add(key)  # an exact copy or a lagging average: not this bug
                return
            seen = self.ratios.setdefault(key, [])
            seen.append(ratio)
            if len(seen) >= MIN_SEEN:
                self.done.add(key)
                self._report(e, t, seen)

        return callback

    def _report(self, e: ModelInfo, t: ModelInfo, ratios: list[float]) -> None:
        worst = max(ratios)
        msg = (f"{e.name}, a copy of {t.name} that no optimizer holds and that is updated towards it, moves almost all "
               f"the way to {t.name} at every update: on {len(ratios)} checked steps its distance to {t.name} after "
               f"the update was at most {worst:.2g} times the distance {t.name} itself moved in that step, so its "
               f"effective decay is about {worst:.2g}, not the 0.9-0.9999 of a moving average. The decay and 1 - decay "
               "(or tau and 1 - tau) are swapped in the update: the average is the trained model of one step ago, "
               "with no smoothing for evaluation and no slowly moving target for a teacher or a target network.")
        fix = ("update with ema = decay * ema + (1 - decay) * model, e.g. ema_p.mul_(decay).add_(p.detach(), "
               "alpha=1 - decay) or ema_p.lerp_(p, 1 - decay) (a soft target update: target = (1 - tau) * target "
               "+ tau * online with a small tau), or use torch.optim.swa_utils.AveragedModel with "
               "get_ema_multi_avg_fn(decay).")
        self.s.report("ema-decay-swapped", msg, where=f"{e.name} (the average of {t.name})", fix=fix,
                      key=f"{e.name}:{t.name}")

    def remove_hooks(self) -> None:
        for handle, _ in self.handles:
            if handle:
                handle.pop().remove()
        self.handles.clear()
