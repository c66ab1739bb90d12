"""Guard on averaged weights swapped into the trained model for an evaluation and never swapped back (slug
``eval-pass-changes-training``, widened from an evaluation forward's own writes to the writes made for it; issue 33).

An invariant of every correct program that keeps a running average of the weights it trains (an EMA, a Polyak
average kept as tensors, a module or a ``{name: tensor}`` dictionary): training resumes from the weights its last
optimizer step left.  Evaluating the average by copying it into the trained model is fine when the trained weights
are put back before the next training forward (diffusers' ``ema.store`` / ``ema.copy_to`` / ``ema.restore``); when
they are not (huggingface/diffusers#2321), every validation drags the model back to the lagging average, the
optimizer's moments no longer match the weights they were built on, and nothing fails.

Observed on the values, whatever the code's form:

- at the first checked step, the user's frames are read once (as :mod:`overt.guards.shadow` does) for candidate
  averages of each trained model ``T``: modules, ``{name: tensor}`` dictionaries and lists or tuples of tensors,
  one attribute deep in the user's objects at most, with exactly ``T``'s parameter shapes, sharing no memory with
  ``T``, whose tensors no optimizer holds;
- a candidate is a *per-step* average when its tensors were written in place between every two consecutive
  warm-up steps (version counters, read after each checked step: Python integers, no device read): a
  once-per-round aggregate (FedAvg's global weights) or a Lookahead's slow weights are not;
- after a step whose successor is checked (a function of the step count), ``T``'s parameters are fingerprinted
  on the device (per parameter: sum and sum of absolute values in float64), again at the first evaluation forward
  of ``T`` that follows (autograd off or eval mode) together with each per-step average, and at the next training
  forward; one deferred read compares them.

Reported when the weights at the evaluation differ from those the step left, equal one per-step average's exactly,
and are still the weights the next training forward reads: the evaluation ran on the average copied into the
trained model, and training went on from it.  Silent when the trained weights are put back (the twin), when the
evaluated weights are no per-step average's (a clamp or max-norm projection after the step, a FedAvg round, a
checkpoint loaded), and when the average is evaluated as its own module.  Nothing runs on other steps.
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.evalwrites import fingerprint_of
from overt.guards.shadow import _NOT_OBJECTS, _modules, _objects, _tensor_dicts
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

SLUG = "eval-pass-changes-training"
MAX_PARAMS = 256  # parameter tensors of a trained model compared
MAX_TRAINED = 4  # trained models followed
MAX_CANDIDATES = 8  # candidate averages per trained model
MAX_LOOKS = 4  # evaluations looked at per trained model
MIN_WRITTEN = 3  # consecutive warm-up step pairs between which a per-step average was written


def _tensor_lists(named: list[tuple[str, Any]]) -> list[tuple[str, list]]:
    """Lists and tuples of tensors among ``named`` and one attribute deep in the user's own objects."""
    out: list[tuple[str, list]] = []

    def take(path: str, value: Any) -> None:
        if isinstance(value, (list, tuple)) and 0 < len(value) <= 4096 \
                and all(isinstance(v, torch.Tensor) for v in value):
            out.append((path, list(value)))

    for name, value in named:
        if isinstance(value, (list, tuple)):
            take(name, value)
            continue
        if isinstance(value, (nn.Module, dict, torch.Tensor, *_NOT_OBJECTS)):
            continue
        owner = type(value).__module__ or ""
        if owner.split(".")[0] in ("torch", "overt", "numpy", "builtins"):
            continue
        try:
            attrs = list(object.__getattribute__(value, "__dict__").items())[:256]
        except Exception:  # noqa: BLE001  no instance dictionary
            continue
        for attr, v in attrs:
            take(f"{name}.{attr}", v)
    return out


class _Candidate:
    __slots__ = ("path", "tensors", "versions", "written", "gaps")

    def __init__(self, path: str, tensors: list[torch.Tensor]) -> None:
        self.path = path
        self.tensors = [weakref.ref(t) for t in tensors]
        self.versions = [t._version for t in tensors]
        self.written = 0  # consecutive warm-up step pairs between which every tensor was written
        self.gaps = 0  # pairs between which some tensor was not

    def alive(self) -> list[torch.Tensor] | None:
        out = [r() for r in self.tensors]
        return None if any(t is None for t in out) else out  # type: ignore[misc]

    def per_step(self) -> bool:
        return self.written >= MIN_WRITTEN and not self.gaps


class _Trained:
    __slots__ = ("module", "name", "params", "cands", "step_print", "look", "looks", "reported")

    def __init__(self, module: nn.Module, name: str, params: list[torch.Tensor]) -> None:
        self.module = weakref.ref(module)
        self.name = name
        self.params = params
        self.cands: list[_Candidate] = []
        self.step_print: torch.Tensor | None = None  # after the step before a checked one
        self.look: tuple | None = None  # (eval print, [(candidate, print)], where) of the evaluation since
        self.looks = 0
        self.reported = False


class SwapBackChecks(Check):
    name = "swapback"

    def __init__(self, session: Any):
        super().__init__(session)
        self.trained: dict[int, _Trained] = {}  # id(T's module) -> record
        self.seen: set[tuple[int, int]] = set()

    # -- the first checked step: the trained models and their candidate averages ------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        key = (id(oi), len(self.s.models))
        if key in self.seen or len(self.trained) >= MAX_TRAINED:
            return
        self.seen.add(key)
        held = {id(p) for p in oi.params}
        new = []
        for info in list(self.s.models.values()):
            m = info.module
            if id(m) in self.trained or len(self.trained) >= MAX_TRAINED:
                continue
            params = [p for p in m.parameters() if p.is_floating_point() and p.numel()][:MAX_PARAMS]
            if params and all(id(p) in held for p in params):
                rec = self.trained[id(m)] = _Trained(m, info.name, params)
                new.append(rec)
        if new and oi.steps == 0:
            self._find(new)

    def _find(self, new: list[_Trained]) -> None:
        allheld = {id(p) for o in self.s.optimizers.values() for p in o.params}
        objects = _objects(sys._getframe(1))
        found: list[tuple[str, list[torch.Tensor]]] = []
        for path, module, _ in _modules(objects):
            if id(module) not in self.trained:
                found.append((path, [p for p in module.parameters() if p.is_floating_point() and p.numel()]))
        for path, d in _tensor_dicts(objects):
            found.append((path, [v for v in d.values() if v.is_floating_point() and v.numel()]))
        for path, lst in _tensor_lists(objects):
            found.append((path, [v for v in lst if v.is_floating_point() and v.numel()]))
        for rec in new:
            shapes = [tuple(p.shape) for p in rec.params]
            ptrs = {p.untyped_storage().data_ptr() for p in rec.params}
            for path, tensors in found:
                if len(rec.cands) >= MAX_CANDIDATES:
                    break
                tensors = tensors[:MAX_PARAMS]
                if [tuple(t.shape) for t in tensors] != shapes:
                    continue
                if any(id(t) in allheld or t.untyped_storage().data_ptr() in ptrs for t in tensors):
                    continue
                if any(c.tensors[0]() is tensors[0] for c in rec.cands):
                    continue
                rec.cands.append(_Candidate(path, tensors))

    # -- warm-up: which candidates are written at every step ---------------------------------------
    def after_checked_step(self, oi: OptInfo) -> None:
        if oi.steps > self.s.options.warmup_steps:
            return
        for rec in self.trained.values():
            for c in rec.cands:
                tensors = c.alive()
                if tensors is None:
                    c.gaps += 1
                    continue
                now = [t._version for t in tensors]
                if oi.steps >= 2:  # the first pair starts after step 1 (the average may begin at step 1)
                    if all(a != b for a, b in zip(now, c.versions)):
                        c.written += 1
                    else:
                        c.gaps += 1
                c.versions = now

    # -- after the step before a checked one: the weights the step left --------------------------
    def on_arming(self, oi: OptInfo) -> None:
        if not oi.armed or oi.steps <= self.s.options.warmup_steps:
            return
        held = None
        for rec in self.trained.values():
            if rec.reported or rec.looks >= MAX_LOOKS or not any(c.per_step() for c in rec.cands):
                continue
            if held is None:
                held = {id(p) for p in oi.params}
            if id(rec.params[0]) not in held:
                continue
            rec.step_print, rec.look = fingerprint_of(rec.params), None

    # -- the evaluation forward that follows, then the next training forward ------------------------
    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        self._at_eval(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._at_eval(info)

    def _at_eval(self, info: ModelInfo) -> None:
        rec = self.trained.get(id(info.module))
        if rec is None or rec.step_print is None or rec.look is not None:
            return
        now = fingerprint_of(rec.params)
        if now is None:
            rec.step_print = None
            return
        prints = []
        for c in rec.cands:
            tensors = c.alive() if c.per_step() else None
            if tensors is not None:
                p = fingerprint_of(tensors)
                if p is not None and p.shape == now.shape and p.device == now.device:
                    prints.append((c, p))
        if not prints:
            rec.step_print = None
            return
        rec.look = (now, prints, user_location(skip=3))

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        rec = self.trained.get(id(info.module))
        if rec is None or rec.step_print is None:
            return
        before, look = rec.step_print, rec.look
        rec.step_print, rec.look = None, None
        if look is None or not torch.is_grad_enabled() or not info.module.training:
            return
        now = fingerprint_of(rec.params)
        if now is None:
            return
        evald, prints, where = look
        rec.looks += 1
        moved = (evald != before).any()
        kept = (now == evald).all()
        flags = [moved & kept & (p == evald).all() for _, p in prints]
        cands = [c for c, _ in prints]

        def judge(vals: list[float]) -> None:
            hit = next((c for c, v in zip(cands, vals) if v), None)
            if hit is not None:
                self._report(rec, hit, where)

        self.s.defer(torch.stack(flags).float(), judge)

    def _report(self, rec: _Trained, c: _Candidate, where: str | None) -> None:
        if rec.reported:
            return
        rec.reported = True
        at = f" at {where}" if where else ""
        self.s.report(
            SLUG,
            f"the evaluation{at} ran {rec.name} on weights copied from {c.path}, an average of its weights written "
            f"at every step, and training went on from them: the next training forward read exactly {c.path}'s "
            "values, not the weights the last optimizer step left. Every evaluation drags the trained model back "
            "to the lagging average, and the optimizer's moments no longer match the weights they were built on.",
            fix=f"keep the trained weights before copying {c.path} in (store them) and put them back after the "
            "evaluation (restore), or evaluate the average as a model of its own (a deepcopy holding the averaged "
            "weights).",
            where=f"{rec.name} <- {c.path}" + (f" (evaluation at {where})" if where else ""), key=rec.name,
        )
