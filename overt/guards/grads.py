"""Guards on gradients and the optimizer step.

Slugs: ``stale-gradients``, ``zero-grad-misplaced``, ``params-not-optimized``,
``no-gradient``, ``params-not-updating``, ``non-finite`` (gradients),
``exploding-gradients``, ``vanishing-gradients``.

Stale gradients are found from host metadata only (no device read): after a
checked optimizer step the guard remembers each gradient tensor and its
version counter; a hook on the parameter sees the next accumulation.  If the
gradient is still the very tensor the optimizer just used, unchanged since
(no ``zero_grad``, no ``grad = None``, no ``zero_()``), the new gradient is
being added to the old one.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.unwrap import is_sharded
from overt.guards.where import user_location
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo


#: Optimizers whose update is the gradient times a learning rate (plus momentum): a gradient norm far
#: above its running range makes an update as far above its range.  Adaptive optimizers (Adam,
#: AdamW, RMSprop, Adagrad, Adadelta, ...) divide by a running scale of the gradient, so one
#: element's update stays near the learning rate whatever the gradient's norm; a policy-gradient
#: loss summed over an episode that got 10x longer, or a policy leaving saturation, raises the
#: norm 100x with no blow-up.  There ``exploding-gradients`` cannot prove its premise and stays
#: silent (a gradient that overflows is still stopped as ``non-finite``).
_UPDATE_FOLLOWS_GRADIENT = (torch.optim.SGD, torch.optim.ASGD)
#: every parameter's gradient norm below this on a checked step: the fit is at its minimum, and parameters that stop
#: moving after it are not evidence of a broken update (params-not-updating stays silent)
SETTLED = 1e-6
#: a first layer's gradient norm under which even an update normalised by the gradient's scale stalls: every
#: element is below the usual epsilon of adaptive optimizers (1e-8)
VANISHED = 1e-8


#: an SGD update (learning rate x gradient, momentum left out) this large a part of the parameters' norm in one
#: step: the weights are being rewritten, not trained (healthy SGD steps move them by well under 1%)
BLOWUP = 0.1


def _rates(opt: Any, params: list[torch.Tensor]) -> list[float] | None:
    """Each of ``params``' learning rate in ``opt`` as a Python float; None when one is unknown or a tensor on an
    accelerator (reading it would synchronise)."""
    by_id: dict[int, float] = {}
    for group in opt.param_groups:
        lr = group.get("lr")
        if isinstance(lr, torch.Tensor):
            if lr.device.type != "cpu" or lr.numel() != 1:
                return None
            lr = float(lr)
        if not isinstance(lr, (int, float)):
            return None
        for p in group["params"]:
            by_id[id(p)] = float(lr)
    rates = [by_id.get(id(p)) for p in params]
    return None if any(r is None for r in rates) else rates  # type: ignore[return-value]


def _relative_update(grads: list[float], weights: list[float] | None, rates: list[float] | None) -> float | None:
    """The norm of the update learning rate x gradient over the norm of the parameters it moves (None: unknown)."""
    if weights is None or rates is None:
        return None
    step = math.sqrt(sum((r * g) ** 2 for r, g in zip(rates, grads)))
    size = math.sqrt(sum(w * w for w in weights))
    if not math.isfinite(step) or not math.isfinite(size):
        return None
    return step / size if size > 0 else math.inf


def update_follows_gradient(opt: Any) -> bool:
    """Whether ``opt``'s step is proportional to the gradient (see :data:`_UPDATE_FOLLOWS_GRADIENT`)."""
    return isinstance(opt, _UPDATE_FOLLOWS_GRADIENT)


def _clear_empty_hook_dicts(params: list[torch.Tensor]) -> None:
    """Removing a tensor hook leaves an empty hook dict that autograd still calls into (taking
    the GIL) on every backward; dropping the empty dict removes that per-parameter cost."""
    for p in params:
        if p._backward_hooks is not None and not p._backward_hooks:
            p._backward_hooks = None
        if getattr(p, "_post_accumulate_grad_hooks", None) is not None and not p._post_accumulate_grad_hooks:
            p._post_accumulate_grad_hooks = None


class _Track:
    __slots__ = ("ref", "ver", "seen", "carried", "probe", "acc", "want", "bwd", "site")

    def __init__(self) -> None:
        self.ref: Any = None
        self.ver = -1
        self.seen = True
        self.carried = False
        self.probe: torch.Tensor | None = None
        self.acc: tuple[Any, int] | None = None  # the gradient and its version right after backward
        # what frozen-params-moved asks of the end of backward (frozenmoves.py): 0 nothing, 1 the
        # gradient's count of non-zero elements, 2 where it is zero; ``bwd`` holds it
        self.want = 0
        self.bwd: torch.Tensor | None = None
        self.site: Any = None  # where the backward that accumulated ``acc`` was called (wastedgrad.py)


def _median(values: list[float]) -> float:
    """``statistics.median`` without its overhead (a few values, on checked steps)."""
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


class GradChecks(Check):
    name = "grads"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.tracks: dict[int, _Track] = {}
        self.hooks: dict[int, list[Any]] = {}  # id(optimizer) -> hook handles
        self.seen_grad: set[int] = set()
        # optimizers whose own warm-up is over: ``params-not-optimized`` and ``no-gradient`` were judged
        # for them.  Per optimizer, not once per session: a model and optimizer made after the first
        # optimizer's warm-up (fine-tuning after pre-training, a second stage) get their own judgement
        self.judged: set[int] = set()
        self.reported_missing: set[str] = set()
        self.snapshots: dict[int, tuple[int, torch.Tensor, int]] = {}
        self.history: dict[str, list[float]] = {}
        self.vanish_strikes = 0
        self.untracked_reset: set[int] = set()
        self.norm_meta: dict[tuple[int, ...], tuple[list[str], list[int]]] = {}  # names, dims per group
        self.flat: set[str] = set()  # optimizers whose last checked step had backward's own all-zero gradients
        # optimizers whose last checked step's gradients were all below SETTLED in norm: a fit at its minimum (a
        # tabular Q-function solved exactly), whose updates may round to nothing without anything being wrong
        self.settled: set[str] = set()
        # LBFGS: its iteration count before a checked step, and the optimizers whose last checked step
        # returned at once because the gradient was already below tolerance_grad (a converged fit)
        self.lbfgs_iters: dict[int, int] = {}
        self.converged: set[str] = set()
        # what backward-discarded (wastedgrad.py) reads: the user's call site of the backward now running, and
        # whether a backward may have accumulated into a tracked parameter since the last step or a scan that found
        # none (its fast path)
        self.site_now: Any = None
        self.accumulated = False

    # -- the hooks -------------------------------------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self.step_pre(oi, closure)

    def after_checked_step(self, oi: OptInfo) -> None:
        self.step_post_checked(oi)

    def on_arming(self, oi: OptInfo) -> None:
        self.track_next(oi, oi.armed)

    # -- stale-gradients bookkeeping ---------------------------------------------
    def track_next(self, oi: OptInfo, armed_next: bool) -> None:
        """After a step: if the next step is checked, remember each gradient tensor."""
        if not armed_next:
            handles = self.hooks.pop(id(oi.opt), None)
            if handles:
                for h in handles:
                    h.remove()
                _clear_empty_hook_dicts(oi.params)
            return
        if self.s.engine_loop:  # the engine resets the gradients after every step itself: nothing to track
            return
        self.accumulated = False  # a step: no gradient written before it can be one a reset discards
        handles = self.hooks.get(id(oi.opt))
        install = handles is None
        if install:
            handles = self.hooks[id(oi.opt)] = []
        for p in oi.params:
            if not p.requires_grad or id(p) in self.untracked_reset:
                continue
            tr = self.tracks.get(id(p))
            if tr is None:
                tr = self.tracks[id(p)] = _Track()
            g = p.grad
            tr.ref = weakref.ref(g) if g is not None else None
            tr.ver = g._version if g is not None else -1
            tr.seen = False
            tr.carried = False
            tr.probe = None
            tr.acc = None
            tr.bwd = None
            tr.site = None
            if install:
                handles.append(p.register_hook(self._make_hook(p, tr)))
                handles.append(p.register_post_accumulate_grad_hook(self._make_acc_hook(tr)))

    def _make_hook(self, p: torch.Tensor, tr: _Track):
        pref = weakref.ref(p)

        def hook(_grad: torch.Tensor) -> None:
            if tr.seen:
                return None
            tr.seen = True
            try:
                param = pref()
                g = param.grad if param is not None else None
                if g is not None and tr.ref is not None and tr.ref() is g and g._version == tr.ver:
                    tr.carried = True
                    tr.probe = g.detach().ne(0).any()
            except Exception as exc:  # a guard never breaks backward
                self.s.check_failed(self, exc)
            return None

        return hook

    def _make_acc_hook(self, tr: _Track):
        def hook(param: torch.Tensor) -> None:
            g = param.grad
            tr.acc = (weakref.ref(g), g._version) if g is not None else None
            tr.site = self.site_now
            self.accumulated = True
            if tr.want and g is not None and not g.is_sparse:  # (no torch.no_grad(): entering it arms forwards)
                g = g.detach()
                tr.bwd = g.count_nonzero() if tr.want == 1 else g.eq(0)

        return hook

    @staticmethod
    def _reset_after_backward(tracks: list[_Track | None], params: list[torch.Tensor]) -> bool | None:
        """Whether a gradient was reset (zeroed in place, replaced, set to None) after backward
        accumulated it: True; False when backward was seen and left every gradient as it made it;
        None when no backward was seen since the last step (the hooks were not installed)."""
        seen = False
        for tr, p in zip(tracks, params):
            if tr is None or tr.acc is None:
                continue
            seen = True
            ref, version = tr.acc
            g = p.grad
            if g is None or ref() is not g or g._version != version:
                return True
        return False if seen else None

    def remove_hooks(self) -> None:
        for handles in self.hooks.values():
            for h in handles:
                h.remove()
        self.hooks.clear()
        _clear_empty_hook_dicts([p for oi in self.s.optimizers.values() for p in oi.params])

    # -- at a checked step, before the optimizer changes the weights ---------------
    def step_pre(self, oi: OptInfo, closure: bool) -> None:
        s = self.s
        if isinstance(oi.opt, torch.optim.LBFGS):
            self.lbfgs_iters[id(oi.opt)] = _lbfgs_iter(oi.opt)
        # a rank's empty FSDP1 shard (use_orig_params=True) never has a gradient: nothing to check
        params = [p for p in oi.params if p.requires_grad and not _empty_shard(p)]
        self._stale(oi, params)
        present = [p for p in params if p.grad is not None and not p.grad.is_sparse]
        foreign = self._foreign(oi, params)
        cut = None
        if params and not present and not closure and not any(p.grad is not None for p in params) and not foreign:
            cut = _loss_without_path(s.losses.last, params, s.step)
        if cut is not None:
            s.report(
                "no-gradient",
                f"{oi.name}.step() was called while none of its {len(params)} trainable parameters had a "
                f"gradient, and the loss last computed ({cut}) has no path back to any of them: a .detach() (or "
                ".data, .item(), a numpy round trip) between these parameters and that loss cuts the graph, so "
                "backward() never reaches them and they never learn (the step itself is in its place).",
                fix="remove the .detach() on the way from these parameters to the loss (a generator's own step "
                "scores its samples without detaching them; only the discriminator's step detaches them).",
                where=f"{oi.name}.step() at {user_location(1) or '?'}; the loss at {cut}", key=oi.name,
            )
        elif params and not present and not closure and not any(p.grad is not None for p in params) and not foreign:
            s.report(
                "zero-grad-misplaced",
                f"{oi.name}.step() was called while none of its {len(params)} trainable parameters "
                "had a gradient: either the gradients were reset between backward() and step(), or "
                "step() ran before backward(). The step changes nothing.",
                fix="order the loop as "
                "zero_grad() -> forward -> loss.backward() -> step().",
                where=f"{oi.name}.step() at {user_location(1) or '?'}, {s.batch_where() or 'training step'}",
                key=oi.name,
            )
        if id(oi.opt) not in self.judged:
            self.seen_grad.update(id(p) for p in present)
            for info in s.models.values():
                for p in info.module.parameters():
                    if p.grad is not None:
                        self.seen_grad.add(id(p))
        from overt.torchrun import Topology

        if Topology.of_group().world_size > 1:  # FSDP shards: one norm per parameter over every rank's shard
            self._sharded_norms(oi, s)
            present = [p for p in present if not is_sharded(p)]
        if not present:
            return
        by_device: dict[torch.device, list[torch.Tensor]] = {}
        for p in present:
            by_device.setdefault(p.grad.device, []).append(p)
        for plist in by_device.values():
            norms = torch.stack(torch._foreach_norm([p.grad for p in plist]))
            key = tuple(map(id, plist))
            meta = self.norm_meta.get(key)
            if meta is None:
                meta = self.norm_meta[key] = ([s.name_of(p) for p in plist], [p.dim() for p in plist])
            # an all-zero step is a misplaced zero_grad() only when a gradient was reset after backward
            # (or no backward was seen); under a closure the gradients are not made yet
            # (the engine's loop never resets them between its backward and its step)
            reset = None if closure else False if s.engine_loop else \
                self._reset_after_backward([self.tracks.get(id(p)) for p in plist], plist)
            # (before the first step nothing was watched: its zeros are judged at the next steps)
            judge = not closure and (reset is True or (reset is None and oi.steps > 0))
            rates = _rates(oi.opt, plist) if update_follows_gradient(oi.opt) else None
            if rates is not None:  # the update's size against the weights' (exploding-gradients), in the same read
                norms = torch.cat([norms, torch.stack(torch._foreach_norm([p.detach() for p in plist]))])
            s.defer(norms, self._on_norms(oi, meta[0], meta[1], s.step, judge_zero=judge, rates=rates))

    def _foreign(self, oi: OptInfo, params: list[torch.Tensor]) -> bool:
        """``optimizer-not-on-model``: ``oi`` holds none of the parameters of the models being run,
        while parameters of theirs receive gradients that no optimizer holds (the model was rebuilt,
        reloaded or altered after the optimizer was made).  True when reported (now or before)."""
        s = self.s
        if s.reporter.has("optimizer-not-on-model", oi.name):
            return True
        if not params or not s.models:
            return False
        held_here = {id(p) for p in params}
        if any(id(p) in held_here for info in s.models.values() for p in info.module.parameters()):
            return False  # (stops at the first of the models' parameters it holds: the model's first, as a rule)
        held = {id(p) for o in s.optimizers.values() for p in o.params}
        orphans = [f"{info.name}.{n}" for info in s.models.values() for n, p in info.module.named_parameters()
                   if p.grad is not None and id(p) not in held]
        if not orphans:
            return False
        models = ", ".join(info.name for info in s.models.values())
        s.report(
            "optimizer-not-on-model",
            f"{oi.name} steps {len(params)} parameter(s), none of which belongs to the model being trained "
            f"({models}), while {len(orphans)} of the model's parameters ({first_names(orphans)}) receive "
            "gradients that no optimizer applies: the model was rebuilt, reloaded or altered (a new instance, a "
            "whole-model torch.load, a replaced layer) after the optimizer was created, which still holds the old "
            "tensors. The model never changes.",
            fix="create the optimizer after the model is final (after loading or surgery), or create it again "
            "from model.parameters(); restore checkpoints into the existing model with load_state_dict().",
            where=f"{oi.name}.step() at {user_location(1) or '?'}", key=oi.name,
        )
        return True

    def _sharded_norms(self, oi: OptInfo, s: GuardSession) -> None:
        """The gradient norms of FSDP-sharded parameters, summed over the ranks (an all-reduce on
        the checked steps, which are the same steps on every rank): every rank reads the same
        values, so a non-finite gradient in one rank's shard stops every rank at the same step,
        none is left waiting in FSDP's next collective, and the norm checks see whole parameters."""
        sharded = [p for p in oi.params if p.requires_grad and is_sharded(p)]  # the same list on every rank
        if not sharded:
            return
        dist = torch.distributed
        local = [_local(p.grad) if p.grad is not None else None for p in sharded]
        device = next((g.device for g in local if g is not None), _local(sharded[0]).device)
        if dist.get_backend() != "nccl":
            device = torch.device("cpu")
        zero = torch.zeros((), device=device, dtype=torch.float32)
        squares = torch.stack([g.detach().float().pow(2).sum().to(device) if g is not None and g.numel() else zero
                               for g in local])
        dist.all_reduce(squares)
        key = tuple(map(id, sharded))
        meta = self.norm_meta.get(key)
        if meta is None:
            meta = self.norm_meta[key] = ([s.name_of(p) for p in sharded], [p.dim() for p in sharded])
        s.defer(squares.sqrt(), self._on_norms(oi, meta[0], meta[1], s.step))

    def _stale(self, oi: OptInfo, params: list[torch.Tensor]) -> None:
        suspects = []
        for p in params:
            tr = self.tracks.get(id(p))
            if tr is None or not tr.carried or tr.probe is None:
                continue
            g = p.grad
            if g is None or tr.ref is None or tr.ref() is not g:
                continue
            suspects.append((p, tr.probe))
        if not suspects:
            return
        nonzero = torch.stack([q.reshape(()) for _, q in suspects]).tolist()  # sync, only when suspicious
        stale = [p for (p, _), nz in zip(suspects, nonzero) if nz]
        for (p, _), nz in zip(suspects, nonzero):
            if not nz:  # reset through .data or similar: not visible to version counters
                self.untracked_reset.add(id(p))
        if stale:
            names = [self.s.name_of(p) for p in stale]
            self.s.stop(
                "stale-gradients",
                f"the gradients of {len(stale)} of {len(params)} parameters ({first_names(names)}) were "
                f"accumulated into after {oi.name}'s previous step without being reset, so this step "
                "would apply the sum of every earlier gradient.",
                fix="call optimizer.zero_grad() once "
                "per step (before backward), or set_to_none after step().",
                where=f"{oi.name}.step() at {user_location(1) or '?'}, {self.s.batch_where() or 'training step'}",
                key=oi.name,
            )

    def _on_norms(self, oi: OptInfo, names: list[str], dims: list[int], step: int, judge_zero: bool = True,
                  rates: list[float] | None = None):
        s = self.s

        def callback(vals: list[float]) -> None:
            weights = None
            if rates is not None:
                vals, weights = vals[:len(names)], vals[len(names):]
            bad = [n for n, v in zip(names, vals) if not math.isfinite(v)]
            if bad:
                s.stop(
                    "non-finite",
                    f"{len(bad)} parameter(s) have NaN/inf gradients at step {s.run_step(step)}: {first_names(bad)}. "
                    "Stepping would write NaN into the weights.",
                    fix="look for log(0), division by "
                    "zero or overflow in the loss; lower the learning rate; clip gradients; use "
                    "bf16 or a GradScaler with fp16.",
                    where=oi.name,
                    key="gradients", can_stop=s.can_stop,
                )
                return
            if vals and max(vals) == 0.0:
                if not judge_zero:  # backward made these zeros (a loss that is exactly flat): nothing to learn
                    self.flat.add(oi.name)
                    return
                s.report(
                    "zero-grad-misplaced",
                    f"{oi.name} stepped with every gradient exactly zero ({len(vals)} parameters): "
                    "the gradients were zeroed between backward() and step().",
                    fix="order the loop "
                    "as zero_grad() -> forward -> loss.backward() -> step().",
                    where=oi.name, key=oi.name, step=step,
                )
                return
            self.flat.discard(oi.name)
            if max(vals) < SETTLED:
                self.settled.add(oi.name)
            else:
                self.settled.discard(oi.name)
            self._dynamics(oi, names, dims, vals, step, _relative_update(vals, weights, rates))

        return callback

    def _dynamics(self, oi: OptInfo, names: list[str], dims: list[int], vals: list[float], step: int,
                  moved: float | None = None) -> None:
        s = self.s
        # a jump in the norm alone proves no blow-up: a model leaving a plateau (an LSTM at chance level for
        # hundreds of steps under SGD) has gradients 50x those of the plateau and takes tiny steps; the premise
        # holds when this step's update moves the parameters by a large part of their own norm
        judge_growth = update_follows_gradient(oi.opt)
        blowing_up = judge_growth and moved is not None and moved >= BLOWUP
        for name, v in zip(names, vals):
            if step < s.options.warmup_steps < s.options.check_every:
                continue  # gradients at initialisation are no baseline for those check_every steps later
            hist = self.history.setdefault(name, [])
            if blowing_up and len(hist) >= 3:
                med = _median(hist[-20:])
                if v > 50.0 * med and v > 1e-3:
                    s.report(
                        "exploding-gradients",
                        f"the gradient norm of {name} is {v:.3g} at step {s.run_step(step)}, "
                        f"{v / max(med, 1e-30):.0f}x "
                        f"its running median {med:.3g}, and this step's update (learning rate x gradient) is "
                        f"{moved:.0%} of the parameters' norm: updates are about to blow up.",
                        fix="lower the "
                        "learning rate, add warmup, or clip with torch.nn.utils.clip_grad_norm_.",
                        where=name, key=oi.name, step=step,
                    )
            hist.append(v)
            if len(hist) > 40:
                del hist[:-20]
        weights = [(n, v) for n, v, d in zip(names, vals, dims) if d >= 2]
        if len(weights) >= 3:
            (first_name, first), (_, last) = weights[0], weights[-1]
            # an update normalised by the gradient's own scale (Adam, RMSprop, Adagrad, ...) moves a layer as far
            # whatever its gradient's norm, until the gradient sinks below the optimizer's epsilon: there a small
            # ratio is no sign of an early layer that stopped learning, only a norm under VANISHED is
            if last > 0 and first < 1e-4 * last and (judge_growth or first < VANISHED):
                self.vanish_strikes += 1
                # "stopped learning" needs the collapse to outlast the warm-up's updates: at initialisation a
                # residual branch or an output layer scaled to ~0 on purpose (DDPM's UNet, Fixup, ReZero) makes
                # every gradient behind it ~0 until the first updates grow it, and those layers are still to start
                if self.vanish_strikes >= 2 and step >= s.options.warmup_steps:
                    s.report(
                        "vanishing-gradients",
                        f"the gradient norm of the first layer {first_name} is {first:.3g}, "
                        f"{last / max(first, 1e-300):.3g}x smaller than the last layer's ({last:.3g}) "
                        f"at step {s.run_step(step)}: early layers have stopped learning.",
                        fix="ReLU/GELU instead "
                        "of sigmoid/tanh in deep stacks, normalisation layers, residual connections, "
                        "or a better initialisation.",
                        where=first_name, key=oi.name, step=step,
                    )
            else:
                self.vanish_strikes = 0

    # -- after a checked step --------------------------------------------------------
    def step_post_checked(self, oi: OptInfo) -> None:
        s = self.s
        if isinstance(oi.opt, torch.optim.LBFGS):  # no iteration: the fit had converged, nothing to move
            before = self.lbfgs_iters.pop(id(oi.opt), None)
            if before is not None and _lbfgs_iter(oi.opt) == before:
                self.converged.add(oi.name)
            else:
                self.converged.discard(oi.name)
        if id(oi.opt) not in self.judged:  # a closure (Lightning, LBFGS) computes the gradients inside
            # step(): they exist only now, so no-gradient is judged on what the step used, not on the pre-hook's view
            self.seen_grad.update(id(p) for p in oi.params if p.grad is not None)
        params = [p for p in oi.params if p.requires_grad][:256]
        if not params:
            return
        if 0 < s.step < s.options.warmup_steps - 1 and id(oi.opt) in self.snapshots:
            return  # the warm-up compares its first and last steps' parameters
        device = params[0].device
        parts, sums = [], []
        grad_was = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)  # views and sums of the parameters build no graph (no detach each)
        try:
            for p in params:
                flat = p.reshape(-1)
                n = flat.numel()
                if n > 32:
                    # each larger tensor's sum in float64: the sampled values alone cannot show that nothing
                    # moved (a step that moves one row of an embedding, the rest put back by the user, misses
                    # them); a tensor of 32 values or fewer is all sampled, exactly, and needs no sum
                    total = flat.sum(0, keepdim=True, dtype=torch.float64)
                    stride = n // 32  # 32 values spread over the tensor, in one slicing op
                    flat = flat[:32 * stride:stride]
                    sums.append(total if total.device == device else total.to(device))
                parts.append(flat if flat.device == device else flat.to(device))
            if not any(part.numel() for part in parts):
                return  # none of these parameters has an element on this rank (FSDP's empty shards): nothing to see
            # one float64 copy, the snapshot: the sampled values (exact in float64) and then the sums
            current = torch.cat(parts + sums) if sums else torch.cat(parts).double()
            prev = self.snapshots.get(id(oi.opt))
            self.snapshots[id(oi.opt)] = (oi.steps, current, len(sums))
            if prev is not None and prev[1].shape == current.shape and prev[2] == len(sums):
                # the largest change of any sampled value or sum, in one op: 0 when nothing moved (NaN when a
                # value is NaN or infinite, as moved)
                s.defer(torch.dist(current, prev[1], p=math.inf), self._on_update(oi, prev[0], oi.steps))
        finally:
            torch._C._set_grad_enabled(grad_was)
        if id(oi.opt) not in self.judged and oi.steps >= s.options.warmup_steps:
            self.end_of_warmup(oi)

    def _on_update(self, oi: OptInfo, a: int, b: int):
        s = self.s

        def callback(vals: list[float]) -> None:
            if vals[0] == 0.0 and oi.name not in self.flat and oi.name not in self.converged \
                    and oi.name not in self.settled \
                    and not s.reporter.has("zero-grad-misplaced", oi.name) \
                    and not s.reporter.has("no-gradient", oi.name) \
                    and not s.reporter.has("optimizer-not-on-model", oi.name):
                lrs = sorted({g.get("lr", float("nan")) for g in oi.opt.param_groups})
                lr = ", ".join(f"{x:g}" if not isinstance(x, torch.Tensor) else f"{float(x):g}" for x in lrs)
                s.report(
                    "params-not-updating",
                    f"{oi.name} stepped {b - a} time(s) between steps {a} and {b} but none of its "
                    f"parameters moved (sampled values and each tensor's sum identical; lr = {lr}). Causes: "
                    "learning rate 0, all gradients zero, a GradScaler skipping every step, or a frozen model.",
                    fix="check the learning rate and that the loss depends on these parameters.",
                    where=f"{oi.name}, steps {a}-{b}", key=oi.name, step=b,
                )

        return callback

    # -- an optimizer's first steps are over ------------------------------------------
    def end_of_warmup(self, oi: OptInfo) -> None:
        """Judge what ``oi``'s warm-up showed: parameters with gradients that no optimizer holds (of
        every model known now: a model made with this optimizer is known by its first steps), an
        optimizer with nothing trainable, parameters it holds that never received a gradient."""
        self.judged.add(id(oi.opt))
        s = self.s
        optimized = {id(p) for o in s.optimizers.values() for p in o.params}
        # trainable parameters that got a gradient but no optimizer holds
        missing = []
        for info in s.models.values():
            if _copy_of_a_trained_model(info.module, s, optimized):
                continue  # a target network or average: changed by copying, which this check cannot see
            for name, p in info.module.named_parameters():
                label = f"{info.name}.{name}"
                if p.requires_grad and id(p) in self.seen_grad and id(p) not in optimized \
                        and label not in self.reported_missing:
                    missing.append(label)
        if missing and not any(s.reporter.has("optimizer-not-on-model", o.name) for o in s.optimizers.values()):
            self.reported_missing.update(missing)
            s.report(
                "params-not-optimized",
                f"{len(missing)} trainable parameter(s) receive gradients but no optimizer holds "
                f"them: {first_names(missing)}. They never change.",
                fix="build the optimizer after the model "
                "is complete, from model.parameters() (or add a param group with "
                "optimizer.add_param_group); freeze on purpose with requires_grad_(False).",
                where=first_names(missing, 3), key="missing" if len(self.judged) == 1 else f"missing:{oi.name}",
            )
        # (gradients written by hand on parameters without autograd -- evolution strategies, zeroth-order
        # estimates -- are stepped on purpose: those parameters do learn)
        if oi.params and not any(p.requires_grad for p in oi.params) and all(p.grad is None for p in oi.params):
            s.report(
                "params-not-optimized",
                f"every one of the {len(oi.params)} parameters of {oi.name} has requires_grad=False: "
                "it can never learn anything.",
                fix="unfreeze them (requires_grad_(True)) or give "
                "the optimizer the trainable parameters.",
                where=oi.name, key=oi.name,
            )
        # parameters this optimizer holds that never received a gradient
        never = [s.name_of(p) for p in oi.params
                 if p.requires_grad and id(p) not in self.seen_grad and not _empty_shard(p)
                 and not s.reporter.has("zero-grad-misplaced", oi.name)
                 and not s.reporter.has("no-gradient", oi.name)
                 and not s.reporter.has("optimizer-not-on-model", oi.name)]
        if never:
            s.report(
                "no-gradient",
                f"{len(never)} trainable parameter(s) held by an optimizer received no gradient in the "
                f"first {oi.steps} steps: {first_names(never)}. A detached path (.detach(), .data, .item(), "
                "numpy round trip), an unused layer or a mistaken freeze means they never learn.",
                fix="keep the computation in torch from these layers to the loss, or remove/freeze them "
                "on purpose (requires_grad_(False)).",
                where=first_names(never, 3), key="never" if len(self.judged) == 1 else f"never:{oi.name}",
            )

    def end_of_run(self) -> None:
        for oi in list(self.s.optimizers.values()):
            if id(oi.opt) not in self.judged and oi.steps >= 1:
                self.end_of_warmup(oi)


def _loss_without_path(last: tuple[int, frozenset[int] | None, str] | None, params: list[torch.Tensor],
                       step: int) -> str | None:
    """Where the last loss (of this step or the one before: another optimizer may have stepped since)
    was computed, when its graph reaches none of ``params``; None when it reaches one, when no such
    loss was seen, or when its graph was too large to walk (nothing proven)."""
    if last is None or not 0 <= step - last[0] <= 1 or last[1] is None:
        return None
    if any(id(p) in last[1] for p in params):
        return None
    return last[2] or "a loss function call"


def _lbfgs_iter(opt: Any) -> int:
    """LBFGS's count of iterations so far (it keeps its state under its first parameter)."""
    params = getattr(opt, "_params", None)
    state = opt.state.get(params[0], {}) if params else {}
    return int(state.get("n_iter", 0))


def _empty_shard(p: torch.Tensor) -> bool:
    """A parameter of which this rank holds no element (FSDP1 with ``use_orig_params=True``)."""
    return p.numel() == 0 and is_sharded(p)


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t`` (an FSDP2 ``DTensor``'s local shard; other tensors as they are)."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _copy_of_a_trained_model(module: torch.nn.Module, s: Any, optimized: set[int]) -> bool:
    """Whether ``module`` has no parameter any optimizer holds while its parameters have, in order,
    the shapes of another watched model's whose trainable parameters optimizers hold all of: a copy
    of a trained model (a DQN's target network, an EMA or teacher copy) that the program refreshes
    by copying (``load_state_dict``, ``copy_``), so that gradients reaching it prove nothing about
    whether it changes."""
    own = list(module.parameters())
    if not own or any(id(p) in optimized for p in own):
        return False
    shapes = [tuple(p.shape) for p in own]
    for info in s.models.values():
        other = list(info.module.parameters())
        trainable = [p for p in other if p.requires_grad]
        if info.module is not module and trainable and all(id(p) in optimized for p in trainable) \
                and [tuple(p.shape) for p in other] == shapes:
            return True
    return False
