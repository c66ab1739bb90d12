"""Guard on an evaluated average of the model that is still its initialisation
(slug ``eval-copy-near-initial``; issue 33).

An invariant of a run that reports an averaged model (an EMA, a SWA or Polyak average, a copy that
is pulled towards the trained weights): the average has absorbed the training it averages.  After
the last optimizer step, the weights that are evaluated sit somewhere near the weights that were
trained, not near where training started.  Three causes break it and crash nothing: an EMA whose
warm-up term is never used (the decay is its final value, 0.9998, from the first update), a decay
whose horizon ``1 / (1 - decay)`` is longer than the run, an average started from the initial
weights and updated only a few times.  The averaged model then scores mostly the random initialisation
while the trained model is good.

What is proven before anything is said (host reads only at the first checked step and at the end;
the same strided values of each of the first :data:`MAX_PARAMS` tensors, :func:`overt.guards.samples.weight_sample`):

- a trained model ``T`` (held by an optimizer) had its weights sampled before its first step
  (``T0``);
- a watched model ``E`` with exactly ``T``'s parameter shapes, whose parameters no optimizer holds,
  ran forwards in eval mode (or without gradients) after the last optimizer step of the run: it
  is what the run evaluates at the end, not a teacher run inside each training step;
- ``T`` is the only trained model with those shapes (an average over several trained models, as
  federated averaging or a model soup make, need not lie near any one of them);
- at that evaluation ``E`` has moved away from ``T0`` (it is not a frozen copy: that is
  ``eval-model-stale``'s or a reference model's case), but by less than :data:`NEAR` of the
  distance ``T`` itself moved from ``T0``, and ``T`` moved (a run that trained).

A pretrained teacher or any model that did not start as ``T0`` is far from ``T0`` and stays quiet;
an EMA that warmed up, a SWA average and a target network synced from the model are near ``T``.

The same property, when ``T``'s weights were loaded (a resumed run, a fine-tuning from a checkpoint): an
average taken from the model *before* its ``load_state_dict`` starts from the weights the load replaced,
and with a decay near 1 it stays there (BangLiu/QANet-PyTorch#4).  Then ``E`` is far from ``T0`` (the
loaded weights) and the check above is quiet; what is proven instead:

- ``T`` was loaded once (``nn.Module.load_state_dict``, patched) before any optimizer holding it had
  stepped, and its weights just before that load were sampled then (``P``, on the device, once per load
  of a model not yet trained; a model loaded twice -- a target network synced again and again -- is
  dropped);
- ``T`` is the only trained model with ``E``'s shapes that was loaded so (clients of a federated run each
  load the global weights: nothing is said there); a ``T`` loaded so is never judged against ``T0`` (its
  ``T0`` is a checkpoint, so an average that lags behind it is not "mostly the initialisation");
- at ``E``'s evaluation after the last optimizer step, ``E`` moved away from ``P`` (it is updated, not a
  frozen copy) but by less than :data:`NEAR` of the distance from ``P`` to ``T``'s trained weights.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.samples import weight_sample
from overt.guards.stale_eval import param_shapes, trained_copies
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

MAX_PARAMS = 64  # parameter tensors sampled per model
NEAR = 0.1  # an evaluated copy that moved less than this share of the trained model's way from T0
MOVED = 1e-3  # T moved: its distance from T0 relative to T0's norm
FROZEN = 1e-6  # E moved: its distance from T0 relative to T's; below it E is a frozen copy of T0
MAX_COPIES = 8  # evaluated models followed


def _float_params(module: Any) -> list[torch.Tensor]:
    return [p for p in list(module.parameters())[:MAX_PARAMS] if p.is_floating_point() and p.numel()]


def _sample(params: list[torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return weight_sample(params)


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.dist(a, b.to(a.device)))


class _Load:
    __slots__ = ("module", "sample", "where", "loads")

    def __init__(self, module: Any, sample: torch.Tensor, where: str) -> None:
        self.module = weakref.ref(module)
        self.sample: torch.Tensor | None = sample  # the weights the first load replaced (None: loaded again)
        self.where = where
        self.loads = 1


class _Copy:
    __slots__ = ("step", "where", "sample", "trained", "loaded", "name")

    def __init__(self) -> None:
        self.step = -1  # the session's step at its latest evaluation forward
        self.where: str | None = None
        self.sample: torch.Tensor | None = None  # its values then
        self.trained: list[tuple[int, torch.Tensor]] = []  # (id(T's ModelInfo), T's values then)
        self.loaded: list[tuple[int, torch.Tensor]] = []  # the same, for the one T loaded before training
        self.name = ""


class EvalCopyChecks(Check):
    name = "evalcopy"

    def __init__(self, session: Any):
        super().__init__(session)
        self.initial: dict[int, tuple[tuple, torch.Tensor]] = {}  # id(T info) -> (shapes, T0 sample)
        self.copies: dict[int, _Copy] = {}
        self.loads: dict[int, _Load] = {}  # id(module) -> the weights its load replaced

    # -- P: the weights a load into a model not yet trained replaced -----------------------------
    def before_load(self, module: Any, where: str) -> None:
        """``module.load_state_dict`` is about to run (patched in :mod:`overt.guards.states`)."""
        rec = self.loads.get(id(module))
        if rec is not None and rec.module() is module:
            rec.loads += 1
            rec.sample = None  # loaded again: a synced copy, or a restore after training
            return
        if len(self.loads) >= MAX_COPIES:
            return
        params = _float_params(module)
        if not params:
            return
        own = {id(p) for p in params}
        if any(oi.steps and any(id(p) in own for p in oi.params) for oi in self.s.optimizers.values()):
            return  # already trained in this run: a restore (best weights), not a start from a checkpoint
        self.loads[id(module)] = _Load(module, _sample(params), where)

    def _loaded_before_training(self, copies: list) -> list[int]:
        """Keys of the trained models among ``copies`` loaded once before training."""
        out = []
        for m in copies:
            rec = self.loads.get(id(m.module))
            if rec is not None and rec.module() is m.module and rec.sample is not None:
                out.append(id(m))
        return out

    # -- T0: the trained models before their first step -----------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if oi.steps != 0:
            return
        held = {id(p) for p in oi.params}
        for info in list(self.s.models.values()):
            if id(info) in self.initial:
                continue
            params = _float_params(info.module)
            if params and any(id(p) in held for p in params):
                self.initial[id(info)] = (param_shapes(info.module), _sample(params))

    # -- E: evaluated copies --------------------------------------------------------------------
    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._forward(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._forward(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        st = self.copies.get(id(info))
        return bool(self.initial or self.loads) and (st is None or st.step != self.s.step)

    def _forward(self, info: ModelInfo) -> None:
        if not (self.initial or self.loads) or self.s.reporter.has("eval-copy-near-initial", info.name):
            return
        st = self.copies.get(id(info))
        if st is not None and st.step == self.s.step:
            return  # one look per evaluation between optimizer steps
        shapes = param_shapes(info.module)
        trained = [(k, v) for k, v in self.initial.items() if k != id(info) and v[0] == shapes]
        copies = trained_copies(self.s, info)
        loaded = self._loaded_before_training(copies) if self.loads else []
        if len(trained) != 1 or len(copies) != 1:
            # none, a trained model's own evaluation, or an average over several trained models (federated
            # averaging, a model soup), which need not lie near any one of them: averaging independent
            # updates shrinks them; only one model's trajectory is an average that has to follow it
            trained = []
        if loaded:
            trained = []  # T0 is a checkpoint, not an initialisation: only the weights the load replaced tell
        if not trained and len(loaded) != 1:
            return
        if st is None:
            if len(self.copies) >= MAX_COPIES:
                return
            st = self.copies[id(info)] = _Copy()
        models = {id(m): m for m in self.s.models.values()}
        st.step, st.name = self.s.step, info.name
        st.where = user_location(skip=2)
        st.sample = _sample(_float_params(info.module))
        st.trained = [(k, _sample(_float_params(models[k].module))) for k, _ in trained if k in models]
        st.loaded = [(k, _sample(_float_params(models[k].module))) for k in loaded if k in models and len(loaded) == 1]

    # -- the end: the last evaluation after the last step ---------------------------------------
    def end_of_run(self) -> None:
        models = {id(m): m for m in self.s.models.values()}
        for st in self.copies.values():
            if st.sample is None or st.step != self.s.step:
                continue  # not evaluated after the run's last optimizer step (a teacher run inside each step)
            for key, t_now in st.trained:
                t0 = self.initial[key][1]
                way = _distance(t_now, t0)
                if way <= MOVED * max(float(t0.norm()), 1e-12):
                    continue  # the trained model did not move: nothing to absorb
                from_start = _distance(st.sample, t0)
                if from_start <= FROZEN * way or from_start >= NEAR * way:
                    continue  # a frozen copy of T0 (another entry's), or it absorbed the training
                t_name = models[key].name if key in models else "the trained model"
                e_name = st.name
                if e_name == t_name:  # two instances of one class, both named by it
                    e_name, t_name = f"the evaluated copy of {t_name}", f"the trained {t_name}"
                share = from_start / way
                where = f" at {st.where}" if st.where else ""
                self.s.report(
                    "eval-copy-near-initial",
                    f"{e_name[:1].upper()}{e_name[1:]}, evaluated{where} after the run's last optimizer step, "
                    f"is still near "
                    f"{t_name}'s initial weights: it moved {share:.0%} of the way {t_name}'s training moved "
                    f"them (over strided samples of its weights). It has "
                    f"{t_name}'s architecture, no optimizer holds it and it was updated (an average such as an "
                    "EMA or SWA, or a copy pulled towards the model), but it has absorbed almost none of the "
                    "training: what is evaluated is mostly the random initialisation. Usual causes: an EMA "
                    "warm-up term that is never used, a decay whose horizon 1/(1 - decay) is longer than the "
                    "run.",
                    fix="ramp the decay up from 0 (decay * (1 - exp(-updates / tau)), or min(decay, (1 + updates) "
                    "/ (10 + updates))), use a decay whose horizon is well below the number of updates, or "
                    f"evaluate {t_name.removeprefix('the trained ')} itself until the average has warmed up.",
                    where=f"{st.name} forward, evaluation", key=st.name,
                )
                break
            else:
                self._before_load(st, models)

    def _before_load(self, st: _Copy, models: dict) -> None:
        """``E`` near the weights a load into ``T`` replaced: the average was taken before the load."""
        for key, t_now in st.loaded:
            m = models.get(key)
            rec = self.loads.get(id(m.module)) if m is not None else None
            if rec is None or rec.module() is not m.module or rec.sample is None:
                continue
            way = _distance(t_now, rec.sample)
            if way <= MOVED * max(float(rec.sample.norm()), 1e-12):
                continue  # the load changed nothing: nothing to tell apart
            from_pre = _distance(st.sample, rec.sample)
            if from_pre <= FROZEN * way or from_pre >= NEAR * way:
                continue  # a frozen copy of the replaced weights (another entry's), or far from them
            t_name, e_name = m.name, st.name
            if e_name == t_name:
                e_name, t_name = f"the evaluated copy of {t_name}", f"the trained {t_name}"
            where = f" at {st.where}" if st.where else ""
            load = f" at {rec.where}" if rec.where else ""
            self.s.report(
                "eval-copy-near-initial",
                f"{e_name[:1].upper()}{e_name[1:]}, evaluated{where} after the run's last optimizer step, is "
                f"still near the weights {t_name} had before its load_state_dict{load}: it is "
                f"{from_pre / way:.0%} of the way from them to its trained weights (over strided samples "
                f"of its weights). It has {t_name}'s architecture, no optimizer holds it and it was updated (an "
                "average such as an EMA or SWA), but it was taken from the model before the checkpoint was "
                "loaded into it: the load replaced the live weights only, and what is evaluated is mostly the "
                "weights the load threw away (a random initialisation).",
                fix=f"create the average after {t_name.removeprefix('the trained ')}.load_state_dict(...){load} "
                "(or load the average's own state from the checkpoint too)",
                where=f"load_state_dict{load}" if rec.where else f"{st.name} forward, evaluation", key=st.name,
            )
            return
