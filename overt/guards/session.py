"""The guard session: one set of checks behind PyTorch's own hooks.

A :class:`GuardSession` watches models (root ``nn.Module``\\ s, through forward
pre/post hooks), optimizers (step pre/post hooks) and, through
:mod:`overt.guards.patches`, loss functions and DataLoader iterators.  The
three ways in -- the engine's :class:`~overt.guards.engine.GuardCallback`,
:func:`overt.guard` and ``overt run`` -- only differ in how models and
optimizers are found.

Speed: the clock is the optimizer step.  Steps ``0..warmup_steps-1`` and then
one step in ``check_every`` (stretched up to 20x when the checks would cost
more than ``overhead_budget`` of the training time) are *checked*; on the
other steps every hook returns after a couple of attribute reads.  Checks that need device values
queue device tensors in :attr:`pending`; they are read together by
:meth:`flush`, once per checked step, so there is no host-device
synchronisation on the other steps.
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from time import perf_counter
from typing import Any, Callable, Iterable

import torch
from torch import nn

from overt.findings import Finding
from overt.guards import patches
from overt.guards.activations import ActivationChecks
from overt.guards.data import DataChecks
from overt.guards.distributed import DistributedChecks
from overt.guards.grads import GradChecks
from overt.guards.graphs import GraphChecks
from overt.guards.losses import LossChecks
from overt.guards.modes import ModeChecks, ModelInfo
from overt.guards.options import GuardOptions
from overt.guards.report import GuardError, Reporter
from overt.guards.schedulers import SchedulerChecks

_grad_enabled = torch.is_grad_enabled
_CALIBRATE = 8  # unchecked steps timed after the warm-up, before the first periodic check


def _compiler_disable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Keep torch.compile from tracing into a hook (it runs eagerly, between graphs)."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn


def _never_break(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A hook's own failure must never break the user's training: report it once and go on
    (a :class:`GuardError` that stops the run on purpose passes through)."""

    @functools.wraps(fn)
    def wrapper(self: GuardSession, *args: Any) -> Any:
        try:
            return fn(self, *args)
        except GuardError:
            raise
        except Exception as exc:  # pragma: no cover - defensive
            self.internal_error(fn.__name__, exc)
            return None

    return wrapper


class OptInfo:
    """An optimizer the session watches."""

    __slots__ = ("opt", "params", "steps", "name", "armed", "next_check", "last_check_time", "last_check_step",
                 "pre_handle", "prev_post_time", "calibrate")

    def __init__(self, opt: torch.optim.Optimizer, name: str):
        self.opt = opt
        self.name = name
        self.params: list[torch.Tensor] = [p for g in opt.param_groups for p in g["params"]]
        self.steps = 0
        self.armed = True  # the next step is a checked one
        self.next_check = 0
        self.last_check_time: float | None = None
        self.last_check_step = 0
        self.pre_handle: Any = None  # the step pre-hook, installed only before checked steps
        self.prev_post_time: float | None = None
        # after the warm-up: (post time of the last warm-up step, its steps, its duration), until
        # a few unchecked steps have shown how long a plain step takes (see GuardSession._calibrate)
        self.calibrate: tuple[float, int, float] | None = None


class GuardSession:
    """All guards of one run.  Use :meth:`watch_model`, :meth:`watch_optimizer`
    (or ``auto=True`` to discover both through PyTorch's global hooks), then
    :meth:`close` to get the findings."""

    def __init__(self, options: GuardOptions | None = None, *, auto: bool = False):
        self.options = options or GuardOptions()
        self.reporter = Reporter(self.options)
        self.auto = auto
        self.step = 0  # optimizer steps done (the most any one optimizer did)
        self.armed = True
        self.depth = 0
        self.batch_index: int | None = None  # of the latest training batch, when known
        self.batch_source: Callable[[], int] | None = None  # the index, when no DataLoader gives it
        self.models: dict[int, ModelInfo] = {}
        self.optimizers: dict[int, OptInfo] = {}
        self.param_names: dict[int, str] = {}
        self.pending: list[tuple[torch.Tensor, Callable[[list[float]], None]]] = []
        self.closed = False
        # explain a loss that raises on unchecked steps too (the engine's callback turns this off:
        # the engine names the batch and the likely fix itself)
        self.explain_loss_errors = True
        self.loader_passes: dict[int, int] = {}  # id(dataset) -> DataLoader passes started
        self.check_cost = 0.0  # seconds spent in checks since the last checked step
        self._skip_roots: set[int] = set()
        self._submodules: set[int] = set()
        self._handles: list[Any] = []
        self._global_pre: Any = None
        self._global_opt_pre: Any = None
        self.grads = GradChecks(self)
        self.modes = ModeChecks(self)
        self.losses = LossChecks(self)
        self.graphs = GraphChecks(self)
        self.acts = ActivationChecks(self)
        self.data = DataChecks(self)
        self.scheds = SchedulerChecks(self)
        self.dist = DistributedChecks(self)
        patches.activate(self)
        if auto:
            import torch.optim.optimizer as optim_mod

            self._global_opt_pre = optim_mod.register_optimizer_step_pre_hook(self._opt_pre)
            self._handles.append(optim_mod.register_optimizer_step_post_hook(self._opt_post))
            self._set_global_pre(True)

    # -- reporting ---------------------------------------------------------------
    def report(self, slug: str, message: str, where: str = "", *, key: str = "",
               step: int | None = None, severity: Any = None, details: dict | None = None) -> Finding | None:
        """Record a finding (once per ``(slug, key)``)."""
        if slug in self.options.ignore or self.reporter.has(slug, key):
            return None
        finding = Finding(slug, message, where=where, severity=severity,
                          step=self.step if step is None else step, details=details or {})
        return self.reporter.add(finding, key)

    def stop(self, slug: str, message: str, where: str = "", *, key: str = "", can_stop: bool = True) -> None:
        """Report an error that means the weights are about to be corrupted; raise
        :class:`GuardError` (before the optimizer step) when stopping is allowed."""
        finding = self.report(slug, message, where, key=key)
        if finding is not None and can_stop and self.options.stop_on_error:
            raise GuardError(finding)

    def internal_error(self, where: str, exc: BaseException) -> None:
        """Say once that a guard failed (the training run goes on)."""
        if not getattr(self, "_internal_reported", False):
            self._internal_reported = True
            print(f"overt guard: internal error in {where} ({type(exc).__name__}: {exc}); the guards "
                  f"skip this check and training continues. Please report it.", file=self.options.out())

    def batch_where(self) -> str:
        index = self.batch_index
        if index is None and self.batch_source is not None:
            index = self.batch_source()
        return f"batch {index}" if index is not None else ""

    # -- device values -----------------------------------------------------------
    def defer(self, value: torch.Tensor, callback: Callable[[list[float]], None]) -> None:
        """Queue a device tensor (computed from detached values); ``callback(values)`` runs at
        the next :meth:`flush`."""
        if value.device.type == "meta":
            return
        self.pending.append((value, callback))

    def flush(self, can_stop: bool = True) -> None:
        """Read every queued device value at once (one synchronisation) and run the callbacks."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        flats = []
        for t, _ in pending:
            if t.requires_grad:
                t = t.detach()
            flats.append(t if t.dim() == 1 else t.reshape(-1))
        device = flats[0].device
        if all(f.device == device for f in flats):
            groups = [list(range(len(flats)))]
        else:
            by_device: dict[torch.device, list[int]] = {}
            for i, f in enumerate(flats):
                by_device.setdefault(f.device, []).append(i)
            groups = list(by_device.values())
        values: list[list[float]] = [[] for _ in pending]
        for idx in groups:
            # one read per device; cat promotes bool/int/half to a common dtype
            flat = torch.cat([flats[i] for i in idx]).tolist() if len(idx) > 1 else flats[idx[0]].tolist()
            pos = 0
            for i in idx:
                n = flats[i].numel()
                values[i] = flat[pos:pos + n]
                pos += n
        self._can_stop = can_stop
        for (_, cb), vals in zip(pending, values):
            cb(vals)

    @property
    def can_stop(self) -> bool:
        return getattr(self, "_can_stop", True)

    # -- models ------------------------------------------------------------------
    def watch_model(self, model: nn.Module, name: str | None = None) -> ModelInfo:
        """Hook ``model`` (a root module): forward pre and post hooks."""
        if id(model) in self.models:
            return self.models[id(model)]
        name = name or type(model).__name__
        info = ModelInfo(model, name)
        self.models[id(model)] = info
        for pname, p in model.named_parameters():
            self.param_names.setdefault(id(p), f"{name}.{pname}")
        self._submodules.update(id(m) for m in model.modules())
        info.fwd_left = 3
        info.pre_handle = model.register_forward_pre_hook(self._fwd_pre)
        return info

    def watch_optimizer(self, opt: torch.optim.Optimizer) -> OptInfo:
        """Hook ``opt``'s step (unless the session already hooks every optimizer)."""
        oi = self.optimizers.get(id(opt))
        if oi is None:
            oi = self._add_optimizer(opt)
            if not self.auto:
                oi.pre_handle = opt.register_step_pre_hook(self._opt_pre)
                self._handles.append(opt.register_step_post_hook(self._opt_post))
        return oi

    def _add_optimizer(self, opt: torch.optim.Optimizer) -> OptInfo:
        oi = OptInfo(opt, f"{type(opt).__name__}#{len(self.optimizers)}")
        oi.next_check = self.options.check_every
        self.optimizers[id(opt)] = oi
        for gi, group in enumerate(opt.param_groups):
            for pi, p in enumerate(group["params"]):
                self.param_names.setdefault(id(p), f"{oi.name}.param_groups[{gi}][{pi}] {tuple(p.shape)}")
        return oi

    def name_of(self, p: torch.Tensor) -> str:
        return self.param_names.get(id(p), f"parameter {tuple(p.shape)}")

    # -- hooks -------------------------------------------------------------------
    def _set_global_pre(self, on: bool) -> None:
        if on and self._global_pre is None:
            self._global_pre = nn.modules.module.register_module_forward_pre_hook(self._discover)
        elif not on and self._global_pre is not None:
            self._global_pre.remove()
            self._global_pre = None

    @_never_break
    def _discover(self, module: nn.Module, args: tuple) -> None:
        key = id(module)
        if self.depth or key in self.models or key in self._skip_roots or key in self._submodules:
            return
        if next(module.parameters(), None) is None:
            self._skip_roots.add(key)  # a loss or activation module called on its own
            return
        self.watch_model(module)
        self._fwd_pre(module, args)  # its own pre hook was added too late for this call

    # -- forward hooks are installed only when something will look --------------
    def arm_forwards(self, n: int, only_dropbn_training: bool = False) -> None:
        """Look at the next ``n`` forwards of every watched model (a loader started, a mode
        switched, no_grad was entered): the forward pre-hook costs a few microseconds per
        call, so it is not kept installed between checked steps."""
        for info in self.models.values():
            if not info.dropbn and info.module.training:
                # outside checked steps, a training-mode forward of a model without
                # Dropout/BatchNorm has nothing to look at: leave its forward unhooked
                continue
            if only_dropbn_training and not info.module.training:
                continue
            if info.fwd_left < n:
                info.fwd_left = n
            if info.pre_handle is None:
                info.pre_handle = info.module.register_forward_pre_hook(self._fwd_pre)

    def _sync_forward_hooks(self) -> None:
        for info in self.models.values():
            if not self.armed and info.module.training and not info.dropbn:
                info.fwd_left = 0  # nothing to look at in its unchecked training forwards
            if self.armed and info.pre_handle is None:
                info.pre_handle = info.module.register_forward_pre_hook(self._fwd_pre)
            elif not self.armed and info.fwd_left <= 0 and info.pre_handle is not None:
                info.pre_handle.remove()
                info.pre_handle = None

    @_compiler_disable
    @_never_break
    def _fwd_pre(self, module: nn.Module, args: tuple) -> None:
        info = self.models[id(module)]
        info.forwards += 1
        post = False
        if _grad_enabled():
            if module.training:
                if info.bns:
                    self.modes.tiny_batch(info, args)
                if self.armed or info.forwards <= 3:
                    t0 = perf_counter()
                    self._checked_forward(info, args)
                    self.check_cost += perf_counter() - t0
                    post = True
            else:
                self.modes.grad_forward_in_eval(info, args)
                post = True
        elif info.dropbn:
            self.modes.no_grad_forward(info)
        if self._global_pre is not None:  # discovering: track nesting so inner modules are not roots
            self.depth += 1
            post = True
        if post and info.post_handle is None:
            info.post_handle = module.register_forward_hook(self._fwd_post, always_call=True)
        if not self.armed:
            if _grad_enabled() and module.training:
                info.fwd_left -= 1
            elif info.fwd_left < 1:
                info.fwd_left = 1  # an evaluation phase: keep looking until training resumes
            if info.fwd_left <= 0 and info.pre_handle is not None:
                info.pre_handle.remove()
                info.pre_handle = None

    def light_step(self) -> bool:
        """A middle warm-up step (of steps ``0..warmup_steps-1``, all checked): the checks
        that compare checked steps with each other (graphs kept alive, dead units on two
        checked steps in a row, parameters that never move) need only the first and the
        last two, so these steps skip them."""
        return 0 < self.step < self.options.warmup_steps - 2

    def _checked_forward(self, info: ModelInfo, args: tuple) -> None:
        if not info.scanned:
            self.modes.scan_unregistered(info)
        self.modes.boundary(info, args)
        if self.light_step():
            return
        info.post_graph = True
        if info.relus and self.step >= 1:
            self.acts.arm(info, args)

    @_compiler_disable
    @_never_break
    def _fwd_post(self, module: nn.Module, args: tuple, output: Any) -> None:
        info = self.models.get(id(module))
        if info is None:
            return
        if info.post_handle is not None:
            info.post_handle.remove()
            info.post_handle = None
        if self.depth:
            self.depth -= 1
        failed = output is None and sys.exc_info()[1] is not None
        if info.suspects:
            suspects, info.suspects = info.suspects, []
            if failed:
                for slug, message, where in suspects:
                    self.report(slug, message, where, key=where)
        if info.act_handles:
            self.acts.disarm(info)
        if failed:
            return
        if info.post_graph:
            info.post_graph = False
            self.graphs.watch_output(info, output)
        if info.post_eval:
            info.post_eval = False
            self.modes.watch_eval_output(info, output)

    @_never_break
    def _opt_pre(self, opt: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        """Before a checked step (the hook is only installed then): gradients are final here."""
        oi = self.optimizers.get(id(opt)) or self._add_optimizer(opt)
        if oi.armed:
            t0 = perf_counter()
            closure = len(args) > 1 or kwargs.get("closure") is not None  # args[0] is the optimizer
            self.grads.step_pre(oi, closure)
            self.data.evaluate()
            try:
                self.flush(can_stop=True)
            finally:
                self.check_cost += perf_counter() - t0

    def _opt_post(self, opt: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        """The clock: after every optimizer step.  Unchecked steps cost a few attribute reads."""
        oi = self.optimizers.get(id(opt))
        if oi is not None and not oi.armed and not self.modes.eval_grad_models:
            oi.steps += 1  # the fast path
            if oi.steps > self.step:
                self.step = oi.steps
            if oi.steps < oi.next_check or (oi.calibrate is not None and self._calibrate(oi)):
                return
            oi.prev_post_time = perf_counter()  # end of the last unchecked step: for _schedule
            self._rearm(oi)
            return
        self._opt_post_slow(opt)

    @_never_break
    def _rearm(self, oi: OptInfo) -> None:
        oi.armed = True
        self._after_step(oi, was_armed=False)

    @_never_break
    def _opt_post_slow(self, opt: torch.optim.Optimizer) -> None:
        oi = self.optimizers.get(id(opt)) or self._add_optimizer(opt)
        if self.modes.eval_grad_models:
            self.modes.check_eval_mode_step(oi)
        oi.steps += 1
        if oi.steps > self.step:
            self.step = oi.steps
        was_armed = oi.armed
        if not was_armed:
            oi.prev_post_time = perf_counter()
        else:
            t0 = perf_counter()
            self.grads.step_post_checked(oi)
            self.graphs.step_post(oi)
            self.graphs.check_alive()
            if self.dist.active():
                self.dist.check(oi)
            self._schedule(oi, perf_counter() - t0)
            oi.prev_post_time = None
        oi.armed = oi.steps < self.options.warmup_steps or (
            oi.steps >= oi.next_check and not (oi.calibrate is not None and self._calibrate(oi)))
        if oi.armed or was_armed:
            self._after_step(oi, was_armed)

    def _after_step(self, oi: OptInfo, was_armed: bool) -> None:
        """The next step's checked state changed (or stays checked): hooks follow it."""
        self.grads.track_next(oi, oi.armed)
        if not self.auto:
            if oi.armed and oi.pre_handle is None:
                oi.pre_handle = oi.opt.register_step_pre_hook(self._opt_pre)
            elif not oi.armed and oi.pre_handle is not None:
                oi.pre_handle.remove()
                oi.pre_handle = None
        armed = oi.armed if len(self.optimizers) == 1 else any(o.armed for o in self.optimizers.values())
        if armed != self.armed:
            self.armed = armed
            patches.refresh()
            self._sync_forward_hooks()
        if self.auto:
            self._set_global_pre(self.armed or self.step < self.options.warmup_steps)
            self._set_global_opt_pre(self.armed)

    def _set_global_opt_pre(self, on: bool) -> None:
        import torch.optim.optimizer as optim_mod

        if on and self._global_opt_pre is None:
            self._global_opt_pre = optim_mod.register_optimizer_step_pre_hook(self._opt_pre)
        elif not on and self._global_opt_pre is not None:
            self._global_opt_pre.remove()
            self._global_opt_pre = None

    def _schedule(self, oi: OptInfo, post_cost: float) -> None:
        """Pick the next checked step: ``check_every`` steps on, stretched (up to 20x) so that
        the checks cost at most ``overhead_budget`` of the training time.  The cost of a
        checked step is its wall time (forward, loss, backward hooks, reads) minus the
        average unchecked step's."""
        now = perf_counter()
        interval = self.options.check_every
        budget = self.options.overhead_budget
        if self.dist.active():
            budget = None  # every rank must check at the same steps (ddp-out-of-sync is a collective)
        between = oi.steps - 1 - oi.last_check_step  # unchecked steps since the previous check
        if budget and oi.last_check_time is not None and between >= 2 and oi.prev_post_time is not None:
            plain = max((oi.prev_post_time - oi.last_check_time) / between, 1e-7)
            cost = max(now - oi.prev_post_time - plain, self.check_cost + post_cost)
            interval = max(interval, min(20 * interval, math.ceil(cost / (budget * plain))))
        elif budget and oi.steps == self.options.warmup_steps and oi.last_check_time is not None \
                and oi.last_check_step == oi.steps - 1 and interval > _CALIBRATE + 1:
            # the last warm-up step: its duration is known, a plain step's is not yet; measure
            # a few unchecked steps before placing the first periodic check
            oi.calibrate = (now, oi.steps, now - oi.last_check_time)
            oi.next_check = oi.steps + _CALIBRATE
        self.check_cost = 0.0
        oi.last_check_time, oi.last_check_step = now, oi.steps
        if oi.steps > self.options.warmup_steps:
            oi.next_check = oi.steps - 1 + interval  # index of the next checked step

    def _calibrate(self, oi: OptInfo) -> bool:
        """After the warm-up and a few unchecked steps: place the first periodic check so that
        checks cost at most ``overhead_budget`` (see :meth:`_schedule`).  True when the step
        that was due is not a checked one after all."""
        start, steps, checked = oi.calibrate  # type: ignore[misc]
        oi.calibrate = None
        if oi.steps - steps < 2 or self.options.overhead_budget is None:
            return False
        interval = self.options.check_every
        plain = max((perf_counter() - start) / (oi.steps - steps), 1e-7)
        cost = max(checked - plain, 0.0)
        interval = max(interval, min(20 * interval, math.ceil(cost / (self.options.overhead_budget * plain))))
        oi.next_check = steps - 1 + interval
        return oi.steps < oi.next_check

    # -- end ---------------------------------------------------------------------
    def close(self, error: BaseException | None = None) -> list[Finding]:
        """Final reads and end-of-run checks; remove every hook; return the findings."""
        if self.closed:
            return self.reporter.findings
        self.closed = True
        try:
            self._can_stop = False
            for info in self.models.values():
                if info.suspects and error is not None:
                    for slug, message, where in info.suspects:
                        self.report(slug, message, where, key=where)
                    info.suspects = []
            if error is None:
                self.flush(can_stop=False)
                self.grads.end_of_run()
                self.modes.end_of_run()
                self.losses.end_of_run()
                self.data.evaluate(final=True)
                self.flush(can_stop=False)
            else:
                self.pending = []
        finally:
            self.grads.remove_hooks()
            self.acts.disarm_all()
            for info in self.models.values():
                for name in ("pre_handle", "post_handle"):
                    handle = getattr(info, name)
                    if handle is not None:
                        handle.remove()
                        setattr(info, name, None)
            for h in self._handles:
                h.remove()
            self._handles = []
            self._set_global_pre(False)
            self._set_global_opt_pre(False)
            for oi in self.optimizers.values():
                if oi.pre_handle is not None:
                    oi.pre_handle.remove()
                    oi.pre_handle = None
            patches.deactivate(self)
        return self.reporter.findings


def module_names(root: nn.Module, modules: Iterable[nn.Module], prefix: str) -> dict[int, str]:
    """``id(module) -> "prefix.path"`` for ``modules`` inside ``root``."""
    wanted = {id(m) for m in modules}
    out = {}
    for name, m in root.named_modules():
        if id(m) in wanted and id(m) not in out:
            out[id(m)] = f"{prefix}.{name}" if name else prefix
    return out


def finite(v: float) -> bool:
    return math.isfinite(v)


__all__ = ["GuardSession", "OptInfo", "weakref"]
