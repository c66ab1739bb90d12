"""Guard on a model folded from the trained one that does not compute what the trained model computed (slug
``merged-model-differs``).

An invariant of every correct program that merges what it trained into weights (a LoRA or adapter merge, a
``merge_and_unload``, a scale or norm folded into the layer before it): the folded model computes the function the
trained model computed with the weights its last optimizer step left, to float tolerance.  A merge that adds the
trained delta twice (a second, implicit merge), without the ``alpha / r`` scale the forward applied, or transposed
evaluates and exports another model than the one that was trained, and nothing fails.

Observed on values at the evaluation boundary, whatever the merge's code: a model evaluated after some optimizer
steps of a watched model T (the *trained* model: a model with parameters its optimizer steps and parameters it does
not) is a *fold* of T when its parameters match T's in order (the same parameter objects, or tensors of the same
shape and dtype), at least one parameter that T's optimizer trained has no counterpart in it (folded away), and the
fold is proven to come from T: it holds T's own frozen parameters, or a bit-for-bit copy of one (a copied bias), and
at least one of its weights is not T's (written since the last checked step, or a new tensor that differs).  At its
first evaluation forward (eval mode, or a ``no_grad`` block of the user's), on that forward's own input (at most
:data:`MAX_ROWS` rows), three outputs are computed as user code with the model's state and the random generators
put back: the fold's, the trained model's with the frozen weights it trained with (kept from a checked step) and
the optimizer's weights as they are, and the fold's with T's weights on every matched parameter (the *base*: what
the fold adds nothing to).  Reported when the fold misses more than :data:`MISS` of the change training made to
the output (``|fold - trained| > MISS |trained - base|``); the message gives how many times the trained change the
fold applies.

Silent where the trained function cannot be proven: the optimizer's parameters written since its last step by
anything else (their version counters follow a constant count per step from the checked steps on; a merge that
zeroes the adapter after folding it), T's frozen parameters written between checked steps during training, frozen
weights above :data:`MAX_FROZEN` values (no snapshot), a fold with no parameter proven T's (a teacher, a baseline,
a model loaded from another file), a model another optimizer trains (fine-tuned from T's weights: a model of its
own), T's frozen base evaluated on its own (nothing changed), a best checkpoint loaded
into a copy (every parameter of T has its counterpart: nothing is folded), a change of training below
:data:`MIN_CHANGE` of the output.  Cost: on checked steps, the version counters of T's parameters and one snapshot
of its frozen weights; at evaluation, three forwards once per folded model; after training, at a user ``no_grad``
block (at most :data:`SITE_LOOKS` per line), one global forward pre-hook until the next forward.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.putback import ModelState
from overt.guards.rerun import rerun
from overt.guards.watched import output_tensors
from overt.guards.where import user_location
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

SLUG = "merged-model-differs"
MAX_FROZEN = 1 << 24  # frozen values of a trained model kept as a snapshot (a larger model is not judged)
MAX_ROWS = 256  # rows of the evaluation input the three probe forwards run on
MISS = 0.1  # share of the trained change of the output that the fold may miss
MIN_CHANGE = 1e-3  # the trained change, relative to the trained output, below which nothing is judged
SITE_LOOKS = 4  # user no_grad blocks looked at per line
MAX_LOOKS = 64  # ... and in all


class _Trained:
    """A watched model with parameters an optimizer steps (``trainable``) and parameters it does not (``frozen``):
    the frozen ones' snapshot and the trainable ones' version counters at checked steps."""

    __slots__ = ("info", "oi", "trainable", "frozen", "snap", "snap_versions", "first", "rate", "unprovable")

    def __init__(self, info: ModelInfo, oi: OptInfo, trainable: list, frozen: list):
        self.info = info
        self.oi = oi
        self.trainable = trainable
        self.frozen = frozen
        self.snap: list[torch.Tensor] | None = None
        self.snap_versions: list[int] | None = None
        self.first: tuple[int, list[int]] | None = None  # (optimizer steps, versions) at the first checked step
        self.rate: list[int] | None = None  # version increments per optimizer step, per trainable parameter
        self.unprovable = False

    def record(self) -> None:
        """After a checked step of ``oi``: the trainable parameters' versions at the first two checked steps (a
        constant count per step, verified when a fold is judged), the frozen ones' snapshot, and at every
        later checked step whether training wrote the frozen ones."""
        if self.rate is None:
            steps = self.oi.steps
            versions = [p._version for p in self.trainable]
            if self.first is None:
                self.first = (steps, versions)
            elif steps > self.first[0]:
                d = steps - self.first[0]
                rate = [(v - v0) // d for v, v0 in zip(versions, self.first[1])]
                if any(v - v0 != r * d for v, v0, r in zip(versions, self.first[1], rate)):
                    self.unprovable = True  # not a whole count per step: written by something else too
                self.rate = rate
        if self.snap is None:
            if sum(p.numel() for p in self.frozen) <= MAX_FROZEN:
                self.snap = [p.detach().clone() for p in self.frozen]
                self.snap_versions = [p._version for p in self.frozen]
            else:
                self.unprovable = True
        elif [p._version for p in self.frozen] != self.snap_versions:
            self.unprovable = True  # frozen weights written while training: which values trained is unknown

    def steps_only(self) -> bool:
        """Whether the trainable parameters were written by the optimizer's steps only since the first record."""
        if self.unprovable or self.first is None or self.rate is None:
            return False
        d = self.oi.steps - self.first[0]
        return all(p._version == v0 + r * d for p, v0, r in zip(self.trainable, self.first[1], self.rate))


def _rows(args: tuple) -> tuple | None:
    """``args`` with its tensors cut to their first :data:`MAX_ROWS` rows (tensors of one batch size only)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.dim() == 0 for t in tensors):
        return None
    n = tensors[0].shape[0]
    if any(t.shape[0] != n for t in tensors):
        return None
    if n <= MAX_ROWS:
        return args
    return tuple(a[:MAX_ROWS] if isinstance(a, torch.Tensor) else a for a in args)


def _first_float(output: Any) -> torch.Tensor | None:
    for t in output_tensors(output):
        if t.is_floating_point():
            return t.detach()
    return None


def _script_name(module: nn.Module) -> str | None:
    """The name the running script binds ``module`` to, if any."""
    main = sys.modules.get("__main__")
    for key, value in list(vars(main).items()) if main is not None else ():
        if value is module and not key.startswith("_"):
            return key
    return None


class FoldChecks(Check):
    """A model folded from the trained one (a merge) computes what the trained model computed."""

    name = "fold"

    def __init__(self, session: Any):
        super().__init__(session)
        self.trained: dict[int, _Trained] = {}  # id(model) -> its record
        self.unrelated: set[tuple[int, int]] = set()  # (id(model), id(optimizer)) sharing no parameter
        self.seen: set[int] = set()  # models judged (or found not to be folds)
        self.sites: dict[str, int] = {}
        self.looks = 0
        self.hook: Any = None
        self.running = False
        self.wants_no_grad = False  # see _want

    # -- the trained models, on checked steps ------------------------------------------------
    def after_checked_step(self, oi: OptInfo) -> None:
        ids = None
        for info in list(self.s.models.values()):
            key = id(info.module)
            rec = self.trained.get(key)
            if rec is None or rec.oi is not oi:
                if (key, id(oi)) in self.unrelated:
                    continue
                if ids is None:
                    ids = {id(p) for p in oi.params}
                params = list(info.module.parameters())
                trainable = [p for p in params if id(p) in ids]
                if not trainable:
                    self.unrelated.add((key, id(oi)))
                    continue
                # the optimizer that stepped it last says what is trained now (a second stage starts afresh)
                frozen = [p for p in params if id(p) not in ids and p.is_floating_point()]
                rec = self.trained[key] = _Trained(info, oi, trainable, frozen)
            rec.record()
        if not self.wants_no_grad and self.hook is None:
            self._want()

    # -- candidates: evaluation forwards ------------------------------------------------------
    def on_eval_input(self, info: ModelInfo, args: tuple) -> None:
        if self.running or id(info.module) in self.seen or not self.trained or id(info.module) in self.trained:
            return
        self._judge(info.module, args, info.name)

    def _want(self) -> None:
        """Whether a user ``no_grad`` block should look at the first model it runs (``wants_no_grad``, a plain
        attribute: read at every ``no_grad`` entry): a model was trained, no look is pending, looks are left."""
        self.wants_no_grad = self.hook is None and self.looks < MAX_LOOKS and any(
            not r.unprovable for r in self.trained.values())

    def no_grad_entered(self) -> None:
        site = user_location() or ""
        n = self.sites.get(site, 0)
        if n >= SITE_LOOKS:
            return
        self.sites[site] = n + 1
        self.looks += 1
        self.hook = nn.modules.module.register_module_forward_pre_hook(self._first_forward)
        self.wants_no_grad = False

    def _first_forward(self, module: nn.Module, args: tuple) -> None:
        if self.hook is not None:
            self.hook.remove()
            self.hook = None
            self._want()
        if self.running:
            return
        try:
            key = id(module)
            if key in self.seen or key in self.trained or key in self.s._submodules and key not in self.s.models:
                return
            if module.training and torch.is_grad_enabled():
                return  # a training forward after the block: no evaluation
            if next(module.parameters(), None) is None:
                return
            info = self.s.models.get(key)
            self._judge(module, args, info.name if info is not None else type(module).__name__)
        except Exception as exc:  # a guard never breaks the user's forward
            self.s.check_failed(self, exc)

    # -- the judgement ----------------------------------------------------------------------
    def _judge(self, model: nn.Module, args: tuple, name: str) -> None:
        ready = [r for r in self.trained.values() if r.oi.steps > 0]
        if not ready:
            return
        self.seen.add(id(model))
        x = _rows(args)
        if x is None:
            return
        for rec in ready:
            if rec.unprovable or rec.snap is None:
                continue
            fold = self._fold(model, rec)
            if fold is None or not rec.steps_only():
                continue
            self._probe(model, name, rec, x, *fold)
            return

    def _fold(self, model: nn.Module, rec: _Trained) -> tuple | None:
        """How ``model``'s parameters match the trained model's: (pairs, folded trained names) or None."""
        trained = rec.info.module
        if model is trained or any(m is model for m in trained.modules()):
            return None
        trainable = {id(p) for p in rec.trainable}
        tnamed = list(trained.named_parameters())
        where = {id(p): i for i, (_, p) in enumerate(tnamed)}
        names = {n: i for i, (n, _) in enumerate(tnamed)}
        used: set[int] = set()
        pairs = []  # (model's name, its parameter, index in tnamed)
        pos = 0
        frozen = {id(p) for p in rec.frozen}
        # a parameter another optimizer holds is trained there, unless it is the trained model's frozen one (a base
        # pretrained earlier): a model fine-tuned from the trained one's weights is a model of its own, not a fold
        held = {id(p) for oi in self.s.optimizers.values() for p in oi.params} - frozen
        for en, e in model.named_parameters():
            if id(e) in trainable or id(e) in held or not e.is_floating_point():
                return None
            i = where.get(id(e))
            if i is None:
                j = names.get(en)  # a copy keeps its parameters' names; a merged layer may not
                if j is not None and j not in used and tnamed[j][1].shape == e.shape and \
                        tnamed[j][1].dtype == e.dtype and tnamed[j][1].device == e.device:
                    i = j
            if i is None:
                i = next((j for j in range(pos, len(tnamed)) if j not in used and tnamed[j][1].shape == e.shape
                          and tnamed[j][1].dtype == e.dtype and tnamed[j][1].device == e.device), None)
                if i is None:
                    return None
            pairs.append((en, e, i))
            used.add(i)
            pos = max(pos, i + 1)
        folded = [n for j, (n, p) in enumerate(tnamed) if j not in used and id(p) in trainable]
        if not pairs or not folded:
            return None
        return pairs, folded

    def _probe(self, model: nn.Module, name: str, rec: _Trained, x: tuple, pairs: list, folded: list) -> None:
        trained = rec.info.module
        tnamed = list(trained.named_parameters())
        snap = {id(p): (s, v) for p, s, v in zip(rec.frozen, rec.snap or [], rec.snap_versions or [])}
        moved = [p for p in rec.frozen if p._version != snap[id(p)][1]]  # written since training: a merge
        moved_ids = {id(p) for p in moved}
        shared = [(en, e) for en, e, j in pairs if e is tnamed[j][1]]
        copies = [(en, e, tnamed[j][1]) for en, e, j in pairs if e is not tnamed[j][1]]
        changed_shared = [en for en, e in shared if id(e) in moved_ids]
        if not changed_shared and not copies:
            return  # the trained model's frozen part, unchanged: the base, not a fold
        device = next(model.parameters()).device
        self.running = True
        saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        tstate = ModelState(trained, None)
        try:
            with rerun(model, device), torch.no_grad():
                for m in list(model.modules()) + list(trained.modules()):
                    m.training = False
                try:
                    out_fold = _first_float(model.forward(*x))
                    for p in moved:
                        saved.append((p, p.detach().clone()))
                        p.data.copy_(snap[id(p)][0])
                    equal, differ = [], []
                    for en, e, t in copies:
                        same = torch.equal(e, t)
                        (equal if same and t.numel() > 1 and bool(t.max() != t.min()) else differ if not same
                         else []).append(en)
                        saved.append((e, e.detach().clone()))
                        e.data.copy_(t)
                    out_base = _first_float(model.forward(*x))
                    out_trained = _first_float(trained.forward(*x))
                except Exception:  # noqa: BLE001  a model that cannot take the other's input: nothing to compare
                    return
                finally:
                    for p, v in reversed(saved):
                        p.data.copy_(v)
                    tstate.restore()
        finally:
            self.running = False
        if not shared and not equal:
            return  # no parameter of the trained model in it: not proven to be derived from it
        if not changed_shared and not differ:
            return  # every weight is the trained model's own: nothing was folded in
        if out_fold is None or out_base is None or out_trained is None or \
                not (out_fold.shape == out_base.shape == out_trained.shape):
            return
        f, b, t = out_fold.double(), out_base.double(), out_trained.double()
        change = float((t - b).norm())
        miss = float((f - t).norm())
        scale = float(t.norm())
        if not all(map(lambda v: v == v and v < float("inf"), (change, miss, scale))):
            return
        if change <= MIN_CHANGE * scale or miss <= MISS * change:
            return
        k = float(((f - b) * (t - b)).sum()) / change ** 2
        self._report(model, name, rec, folded, changed_shared + differ, k, miss / change)

    def _report(self, model: nn.Module, name: str, rec: _Trained, folded: list, changed: list, k: float,
                off: float) -> None:
        bound = _script_name(model)
        called = f"{bound} ({type(model).__name__})" if bound else name
        tbound = _script_name(rec.info.module)
        tname = f"{tbound} ({type(rec.info.module).__name__})" if tbound else rec.info.name
        where = user_location(4) or ""
        self.s.report(
            SLUG,
            f"{called}, evaluated after training, is {tname} with its trained parameters "
            f"{first_names(folded, 4)} folded into its weights ({first_names(changed, 4)} changed), yet on its "
            f"evaluation input it does not compute what the trained model computed with the weights its last "
            f"optimizer step left: it applies about {k:.2f} times the change training made to the output (it misses "
            f"{off:.0%} of that change). What is evaluated or exported is then another model than the one "
            "that was trained: a merge applied twice, or without the scale the forward applies (LoRA's alpha / "
            "r), adds the trained delta the wrong number of times; a norm folded with other statistics or "
            "epsilon rescales it.",
            where=where, key=called,
            fix="fold exactly what the forward computes, once: merged = W + scale * (B @ A) with the forward's "
            "scale (a norm: W * gamma / sqrt(var + eps) with the layer's own eps), and make the merge idempotent "
            "(a merged flag, or merge only inside merge_and_unload); then check that the merged model's outputs "
            "equal the trained model's on a batch (torch.allclose).",
        )

    def remove_hooks(self) -> None:
        if self.hook is not None:
            self.hook.remove()
            self.hook = None
