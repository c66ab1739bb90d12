"""Guard on an evaluation pass that scores one batch again and again (slug ``eval-samples-repeated``, the values'
form; :mod:`overt.guards.coverage` judges the indices a DataLoader's sampler hands out).

An invariant of every correct evaluation: one pass feeds the model distinct batches.  The forwards of a watched
model between two optimizer steps (or after the last one) with autograd off or in eval mode are one evaluation
pass; when every forward of a pass of three or more is given the same input values, drawn afresh each time (a
DataLoader batch drawn in between, or a new view of the same storage), and the model answers each of them with
the same output, the pass scored one batch many times and averaged it as if it were many
(wandb/examples#444: ``next(iter(val_loader))`` inside the validation loop makes a new iterator that starts at the
first batch every time; a batch sliced as ``x_val[0:bs]`` where ``x_val[i:i + bs]`` was meant).  The reported
metric is the metric of that batch -- of one class, when the evaluation set is stored by class.

Observed on the values, whatever the code's form: for up to :data:`MAX_PASSES` evaluation passes per model and the
first :data:`MAX_LOOKS` forwards of each, the first tensor argument and the first tensor of the output are
fingerprinted on the device (a fixed strided sample of at most :data:`SAMPLE` values: its sum and a weighted sum,
in float64), and a pass's fingerprints are read once, with the next checked step's values (or at the end of the
run).  Silent where the premise cannot be proven: the same tensor object fed again (a timing loop, Monte Carlo
sampling of one input), fresh tensors that neither come from a loader nor share the previous input's storage (an
environment's observations, copies made for each call), dropout modules left in training mode (MC dropout),
outputs that differ (a stochastic or stateful model: sampling, decoding with a cache), inputs whose rows are all
alike (a constant probe), a batch of one row, inputs that differ (test-time augmentation), and passes before the
first optimizer step.  Nothing runs on training steps.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

SLUG = "eval-samples-repeated"
MAX_PASSES = 4  # evaluation passes looked at per model
MAX_LOOKS = 16  # forwards of one pass fingerprinted
MIN_FORWARDS = 3  # a pass of fewer forwards is not judged
SAMPLE = 4096  # values of a tensor a fingerprint reads
OUT_TOL = 1e-6  # relative difference of two output fingerprints still called equal (kernels may reorder sums)

_WEIGHTS: dict[tuple[int, Any], torch.Tensor] = {}


def first_tensor(obj: Any, depth: int = 0) -> torch.Tensor | None:
    """The first tensor of a forward's arguments or output (a tensor, a tuple or list, a dict), or None."""
    if isinstance(obj, torch.Tensor):
        return obj
    if depth > 2:
        return None
    if isinstance(obj, (tuple, list)):
        for item in obj[:4]:
            found = first_tensor(item, depth + 1)
            if found is not None:
                return found
    elif isinstance(obj, dict):
        for item in list(obj.values())[:4]:
            found = first_tensor(item, depth + 1)
            if found is not None:
                return found
    return None


def fingerprint(t: torch.Tensor) -> torch.Tensor | None:
    """``(sum, weighted sum)`` of a fixed strided sample of ``t``'s values, in float64 on its device (no read)."""
    if t.is_complex() or t.numel() == 0 or t.is_sparse or t.device.type == "meta":
        return None
    with torch.no_grad():
        flat = t.detach().reshape(-1)
        n = flat.numel()
        if n > SAMPLE:
            flat = flat[:: n // SAMPLE][:SAMPLE]
        v = flat.to(torch.float64)
        key = (v.numel(), v.device)
        w = _WEIGHTS.get(key)
        if w is None:
            if len(_WEIGHTS) > 64:
                _WEIGHTS.clear()
            w = _WEIGHTS[key] = (torch.arange(v.numel(), dtype=torch.float64, device=v.device) % 89 + 1)
        return torch.stack((v.sum(), (v * w).sum()))


class _Pass:
    __slots__ = ("step", "forwards", "inputs", "outputs", "shape", "dtype", "distinct", "prev", "ptr", "drawn",
                 "dead", "where")

    def __init__(self, step: int) -> None:
        self.step = step
        self.forwards = 0
        self.inputs: list[torch.Tensor] = []  # fingerprints of the looked-at forwards' inputs
        self.outputs: list[torch.Tensor] = []  # ... and of their outputs
        self.shape: tuple[int, ...] = ()
        self.dtype: Any = None
        self.distinct: torch.Tensor | None = None  # the first input's first and last rows differ (device bool)
        self.prev: Any = None  # weak reference to the previous looked-at input
        self.ptr: tuple[int, int] = (0, 0)  # its storage and offset
        self.drawn = 0  # the session's count of DataLoader batches when it was fed
        self.dead = False  # something seen on the host proves the pass is not one batch scored again
        self.where: str | None = None  # the user's line of the first forward


class _Model:
    __slots__ = ("passes", "current")

    def __init__(self) -> None:
        self.passes = 0
        self.current: _Pass | None = None


def _mc_dropout(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.training and getattr(m, "p", 0) > 0
               for m in module.modules())


NO_GRAD_ARMS = 20  # user no_grad blocks that arm a training-mode model without an evaluation forward following


class EvalRepeatChecks(Check):
    name = "evalrepeat"

    def __init__(self, session: Any):
        super().__init__(session)
        self.models: dict[int, _Model] = {}
        self.hook = OneShotHook()
        self.pending: tuple[ModelInfo, _Pass] | None = None  # the looked-at forward under way
        self.arms: dict[int, int] = {}  # id(ModelInfo) -> user no_grad blocks that armed it in vain, in a row
        self.block_armed: dict[int, list[int]] = {}  # id(user no_grad block) -> the models its entry armed
        self.done = False  # every model's passes looked at
        self.wants_no_grad = False  # a plain attribute (read at every no_grad entry): training started, passes left

    def after_checked_step(self, oi: Any) -> None:
        self.wants_no_grad = not self.done

    def no_grad_entered(self, block: object = None) -> bool:
        """A ``no_grad`` block of the user's code begins after training started: arm the forward of the
        training-mode models (an evaluation without ``eval()``); True when some model was armed for ``block``."""
        armed = []
        left = False
        for info in self.s.models.values():
            key = id(info)
            st = self.models.get(key)
            if st is not None and (st.passes >= MAX_PASSES or self.s.reporter.has(SLUG, info.name)):
                continue
            left = True
            if not info.module.training or self.arms.get(key, 0) >= NO_GRAD_ARMS:
                continue
            self.arms[key] = self.arms.get(key, 0) + 1
            armed.append(key)
            if info.fwd_left < 1:
                info.fwd_left = 1
            if info.pre_handle is None:
                info.pre_handle = info.module.register_forward_pre_hook(self.s._fwd_pre, with_kwargs=True)
        self.done = not left and bool(self.s.models)
        self.wants_no_grad = not self.done
        if armed and block is not None:
            self.block_armed[id(block)] = armed
            return True
        return False

    def no_grad_exited(self, block: object) -> bool | None:
        """The block :meth:`no_grad_entered` armed has exited: whether an evaluation forward of an armed model
        came in it (None if it armed nothing)."""
        keys = self.block_armed.pop(id(block), None)
        if keys is None:
            return None
        return any(self.arms.get(key, 0) == 0 for key in keys)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        st = self.models.get(id(info))
        if st is None:
            return self.s.step >= 1
        cur = st.current
        return st.passes < MAX_PASSES or (cur is not None and not cur.dead and len(cur.inputs) < MAX_LOOKS)

    def on_eval_input(self, info: ModelInfo, args: tuple) -> None:
        self.arms[id(info)] = 0  # an evaluation came: the arming was not in vain
        if self.s.step < 1 or self.pending is not None:
            return
        st = self.models.get(id(info))
        if st is None:
            if len(self.models) >= 8:
                return
            st = self.models[id(info)] = _Model()
        cur = st.current
        if cur is None or cur.step != self.s.step:
            self._finish(info, cur)
            st.current = None
            if st.passes >= MAX_PASSES or self.s.reporter.has(SLUG, info.name):
                return
            st.passes += 1
            cur = st.current = _Pass(self.s.step)
        cur.forwards += 1
        if cur.dead or len(cur.inputs) >= MAX_LOOKS:
            return
        x = first_tensor(args)
        if x is None or x.dim() == 0 or x.shape[0] < 2 or _mc_dropout(info.module):
            cur.dead = True
            return
        ptr = (x.untyped_storage().data_ptr(), x.storage_offset())
        if cur.inputs:
            prev = cur.prev() if cur.prev is not None else None
            fresh = self.s.drawn != cur.drawn or (prev is not x and ptr == cur.ptr)  # a new view, freed or not
            if prev is x or not fresh or tuple(x.shape) != cur.shape or x.dtype != cur.dtype:
                cur.dead = True
                return
        else:
            cur.shape, cur.dtype = tuple(x.shape), x.dtype
            with torch.no_grad():
                cur.distinct = (x[0] != x[-1]).any()
        printed = fingerprint(x)
        if printed is None:
            cur.dead = True
            return
        try:
            cur.prev = weakref.ref(x)
        except TypeError:
            cur.prev = None
        cur.ptr, cur.drawn = ptr, self.s.drawn
        cur.inputs.append(printed)
        self.pending = (info, cur)
        self.hook.place(info.module, self._after)

    def _after(self, module: Any, args: Any, output: Any) -> None:
        pending, self.pending = self.pending, None
        if not self.hook.fired() or pending is None:
            if pending is not None:
                pending[1].dead = True
            return
        info, cur = pending
        try:
            out = first_tensor(output)
            printed = fingerprint(out) if out is not None else None
            if printed is None:
                cur.dead = True
                return
            cur.outputs.append(printed)
            if cur.where is None:
                cur.where = user_location(2)
        except Exception as exc:  # a guard never breaks the user's forward
            cur.dead = True
            self.s.check_failed(self, exc)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        st = self.models.get(id(info))
        if st is not None and st.current is not None:  # training resumed: the pass is over
            self._finish(info, st.current)
            st.current = None

    def _finish(self, info: ModelInfo, cur: _Pass | None) -> None:
        if cur is None or cur.dead or len(cur.inputs) < MIN_FORWARDS or len(cur.outputs) != len(cur.inputs) \
                or cur.distinct is None:
            return
        with torch.no_grad():
            ins = torch.stack(cur.inputs)
            outs = torch.stack(cur.outputs)
            same_in = (ins == ins[0]).all()
            same_out = ((outs - outs[0]).abs() <= OUT_TOL * outs[0].abs() + 1e-12).all()
            verdict = torch.stack((same_in, same_out, cur.distinct.to(same_in.device))).to(torch.float32)
        looked, forwards, shape, where = len(cur.inputs), cur.forwards, cur.shape, cur.where

        def judge(vals: list[float]) -> None:
            if all(v > 0.5 for v in vals[:3]):
                self._report(info, looked, forwards, shape, where)

        self.s.defer(verdict, judge)

    def _report(self, info: ModelInfo, looked: int, forwards: int, shape: tuple, where: str | None) -> None:
        if self.s.reporter.has(SLUG, info.name):
            return
        seen = f"all {forwards}" if looked == forwards else f"the first {looked} of its {forwards}"
        self.s.report(
            SLUG,
            f"an evaluation pass of {info.name} fed {seen} forwards the same batch: equal input values of shape "
            f"{list(shape)}, drawn afresh each time, and equal outputs. The pass scores one batch {forwards} times "
            "and averages it as if it were that many batches, so the metric is the metric of one batch (with an "
            "evaluation set stored by class, of one class); a new iterator made at every step "
            "(next(iter(loader)) inside the loop) starts at the first batch every time, and a slice that does not "
            "move with the loop index gives the same rows.",
            fix="iterate the loader once per pass (for x, y in loader:), or make one iterator before the loop "
            "(it = iter(loader)) and call next(it) inside it; index the evaluation tensor with the loop variable.",
            where=f"{info.name} forward at {where}" if where else f"{info.name} forward", key=info.name,
        )

    def end_of_run(self) -> None:
        for key, st in self.models.items():
            if st.current is not None:
                info = next((i for i in self.s.models.values() if id(i) == key), None)
                if info is not None:
                    self._finish(info, st.current)
                st.current = None

    def remove_hooks(self) -> None:
        self.hook.remove()
