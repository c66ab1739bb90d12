"""The guard session: the checks of one run, behind PyTorch's own hooks.

A :class:`GuardSession` watches models (root ``nn.Module``\\ s, through forward
pre/post hooks), optimizers (step pre/post hooks) and, through
:mod:`overt.guards.patches`, loss functions and DataLoader iterators.  The
three ways in -- the engine's :class:`~overt.guards.engine.GuardCallback`,
:func:`overt.guard` and ``overt run`` -- only differ in how models and
optimizers are found.

The session does not know what its checks look for: it turns hook calls into the
events of :class:`~overt.guards.check.Check` and calls each check registered in
:data:`~overt.guards.registry.CHECKS` that listens to the event, under one
never-break policy (:meth:`GuardSession.check_failed`).

Speed: the clock is the optimizer step (the policy is :mod:`overt.guards.clock`).
Checked steps run the checks; on the other steps every hook returns after a
couple of attribute reads.  Checks that need device values queue device tensors
(:meth:`GuardSession.defer`); they are read together once per checked step
(:mod:`overt.guards.deferred`), so there is no host-device synchronisation on
the other steps.

Parts with their own job: :mod:`overt.guards.forwards` (which forwards are hooked, and their
events), :mod:`overt.guards.never_break` (the hooks' failure policy), :mod:`overt.guards.clock`
(which steps are checked), :mod:`overt.guards.report` (findings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from torch import nn

from overt.findings import Finding
from overt.guards.optdef import PROBE_MARK
from overt.guards.blocksites import BlockSites
from overt.guards import aside, clock, optaside, patches
from overt.guards.check import HOOKS, Check
from overt.guards.deferred import DeferredReads
from overt.guards.forwards import ForwardHooks
from overt.guards.never_break import never_break
from overt.guards.options import GuardOptions
from overt.guards.registry import CHECKS
from overt.guards.report import GuardError, Reporter
from overt.guards.watched import ModelInfo, OptInfo

if TYPE_CHECKING:
    from overt.guards.activations import ActivationChecks
    from overt.guards.coverage import CoverageChecks
    from overt.guards.data import DataChecks
    from overt.guards.evaldata import EvalDataChecks
    from overt.guards.distributed import DistributedChecks
    from overt.guards.grads import GradChecks
    from overt.guards.graphs import GraphChecks
    from overt.guards.losses import LossChecks
    from overt.guards.modes import ModeChecks
    from overt.guards.scaler import ScalerChecks
    from overt.guards.schedulers import SchedulerChecks
    from overt.guards.states import StateChecks

_grad_enabled = torch.is_grad_enabled


_TABLES: dict[tuple[type[Check], ...], dict[str, tuple[int, ...]]] = {}


def _hook_table(classes: tuple[type[Check], ...]) -> dict[str, tuple[int, ...]]:
    """hook -> the positions in ``classes`` of the check classes that override it, in order (worked out
    once per tuple of classes, not once per session: 14 hooks times 40-odd classes)."""
    table = _TABLES.get(classes)
    if table is None:
        overridden = [{h for h in HOOKS if getattr(cls, h) is not getattr(Check, h)} for cls in classes]
        table = _TABLES[classes] = {hook: tuple(i for i, hooks in enumerate(overridden) if hook in hooks)
                                    for hook in HOOKS}
    return table


class GuardSession(ForwardHooks):
    """All guards of one run.  Use :meth:`watch_model`, :meth:`watch_optimizer`
    (or ``auto=True`` to discover both through PyTorch's global hooks), then
    :meth:`close` to get the findings.  ``checks``: the check classes to run
    (default :data:`overt.guards.registry.CHECKS`)."""

    # the default checks, reachable by their ``name``
    grads: GradChecks
    modes: ModeChecks
    losses: LossChecks
    graphs: GraphChecks
    acts: ActivationChecks
    data: DataChecks
    evaldata: EvalDataChecks
    coverage: CoverageChecks
    scheds: SchedulerChecks
    states: StateChecks
    scalers: ScalerChecks
    dist: DistributedChecks

    def __init__(self, options: GuardOptions | None = None, *, auto: bool = False,
                 checks: Sequence[type[Check]] = CHECKS):
        self.options = options or GuardOptions()
        self.reporter = Reporter(self.options)
        self.auto = auto
        self.step = 0  # optimizer steps done (the most any one optimizer did)
        self.armed = True  # some watched optimizer's next step is a checked one
        self.depth = 0
        self.batch_index: int | None = None  # of the latest training batch, when known
        self.drawn = 0  # batches drawn from any DataLoader so far (patches.py counts them)
        self.batch_source: Callable[[], int] | None = None  # the index, when no DataLoader gives it
        # the step findings carry: a framework's own step counter (Lightning's, HF's global_step)
        # when one is given, else the optimizer steps done plus ``step_offset`` (the steps a resumed
        # run had done before this session started: findings carry the run's step, messages too)
        self.step_source: Callable[[], int] | None = None
        self.step_offset = 0
        self.models: dict[int, ModelInfo] = {}
        self.optimizers: dict[int, OptInfo] = {}
        self.param_names: dict[int, str] = {}
        self.reads = DeferredReads(self._callback_failed, GuardError)
        self.closed = False
        # explain a loss that raises on unchecked steps too (the engine's callback turns this off:
        # the engine names the batch and the likely fix itself)
        self.explain_loss_errors = True
        # the training loop is overt's engine (set by its callback): its own loop resets the gradients
        # after every step and evaluates under eval() and inference_mode, so the checks of a hand-written
        # loop's structure (stale-gradient hooks, evaluation loops without eval()/no_grad) have nothing to find
        self.engine_loop = False
        self.loader_batch_size: int | None = None  # of the DataLoader pass started last, when known
        self.loader_passes: dict[int, int] = {}  # id(dataset) -> DataLoader passes started
        self.step_watchers: list[Check] = []  # checks that see every step (see watch_steps)
        self.block_sites = BlockSites()  # the user's no_grad blocks that evaluate (blocksites.py)
        self.unclocked = False  # idle: training forwards but no optimizer step (_idle_without_optimizer)
        self._skip_roots: set[int] = set()
        self._submodules: set[int] = set()
        self._handles: list[Any] = []
        self._global_pre: Any = None
        self._global_opt_pre: Any = None
        self.checks: list[Check] = [cls(self) for cls in checks]
        for check in self.checks:
            if check.name:
                if check.name in vars(self):
                    raise ValueError(f"check {type(check).__name__}: the name {check.name!r} is taken")
                setattr(self, check.name, check)
        # hook -> (check, bound method) for the checks that override it, in registration order
        table = _hook_table(tuple(type(c) for c in self.checks))
        mine = self.checks
        self._hooks: dict[str, list[tuple[Check, Callable[..., Any]]]] = {
            hook: [(mine[i], getattr(mine[i], hook)) for i in positions] for hook, positions in table.items()
        }
        patches.activate(self)
        if auto:
            import torch.optim.optimizer as optim_mod

            self._global_opt_pre = optim_mod.register_optimizer_step_pre_hook(self._opt_pre)
            self._handles.append(optim_mod.register_optimizer_step_post_hook(self._opt_post))
            self._set_global_pre(True)

    # -- the checks ----------------------------------------------------------------
    def _each(self, hook: str, *args: Any) -> None:
        """Call ``hook`` on every check that listens to it, under the never-break policy."""
        self._call(self._hooks[hook], *args)

    def _call(self, calls: list[tuple[Check, Callable[..., Any]]], *args: Any) -> None:
        for check, fn in calls:
            try:
                fn(*args)
            except GuardError:
                raise
            except Exception as exc:
                self.check_failed(check, exc)

    def watch_steps(self, check: Check, on: bool) -> None:
        """Have ``check.on_step`` called after every optimizer step (``on``), or no longer.
        While any check is watching, unchecked steps take the hook's slow path."""
        if on and check not in self.step_watchers:
            self.step_watchers.append(check)
        elif not on and check in self.step_watchers:
            self.step_watchers.remove(check)

    def check_failed(self, check: Check | str, exc: BaseException) -> None:
        """The never-break policy: a check (or the session's own machinery) raised.  Training
        goes on without that call; the failure is reported once per check, by name."""
        self.reporter.internal_error(check if isinstance(check, str) else f"check {type(check).__name__}", exc)

    def _callback_failed(self, callback: Callable[..., Any], exc: BaseException) -> None:
        # a deferred read's callback is defined in its check's class: its qualified name starts with it
        owner = getattr(callback, "__qualname__", "").split(".")[0] or "deferred read"
        self.check_failed(f"check {owner}", exc)

    # -- reporting ---------------------------------------------------------------
    def report(self, slug: str, message: str, where: str = "", *, fix: str = "", why: str = "", key: str = "",
               step: int | None = None, severity: Any = None, details: dict | None = None,
               fix_in_message: bool = False) -> Finding | None:
        """Record a finding (once per ``(slug, key)``): ``message`` says what was seen and why it
        matters, ``fix`` what to change (the finding's ``fix``; the printed message ends with
        ``Fix: ...`` unless ``fix_in_message``: the message already says it in its own words);
        ``why`` replaces the catalog entry's reason when given.  Every guard passes ``fix``
        (tests/guards/test_finding_fields.py); without it the finding reports with an empty ``fix``
        (it is never parsed back out of the message)."""
        if slug in self.options.ignore or self.reporter.has(slug, key):
            return None
        if step is None:
            step = self.run_step(self.step)
            if self.step_source is not None:
                try:
                    step = int(self.step_source())
                except Exception:  # never break training: the session's own count
                    step = self.run_step(self.step)
        else:  # a check's own record of the session's step
            step = self.run_step(step)
        text = f"{message} Fix: {fix}" if fix and not fix_in_message else message
        finding = Finding(slug, text, where=where, severity=severity, step=step, details=details or {},
                          why=why, fix=fix)
        return self.reporter.add(finding, key)

    def run_step(self, step: int) -> int:
        """The run's step of the session's ``step`` (they differ after a resume: ``step_offset``)."""
        return step + self.step_offset

    def stop(self, slug: str, message: str, where: str = "", *, fix: str = "", key: str = "",
             can_stop: bool = True) -> None:
        """Report an error that means the weights are about to be corrupted; raise
        :class:`GuardError` (before the optimizer step) when stopping is allowed."""
        finding = self.report(slug, message, where, key=key, fix=fix)
        if finding is not None and can_stop and self.options.stop_on_error:
            raise GuardError(finding, self.options.silence(finding.slug))

    def batch_where(self) -> str:
        index = self.batch_index
        if index is None and self.batch_source is not None:
            index = self.batch_source()
        return f"batch {index}" if index is not None else ""

    # -- device values -----------------------------------------------------------
    def defer(self, value: torch.Tensor, callback: Callable[[list[float]], None]) -> None:
        """Queue a device tensor (computed from detached values); ``callback(values)`` runs at
        the next checked step's read (see :mod:`overt.guards.deferred`)."""
        self.reads.defer(value, callback)

    @property
    def can_stop(self) -> bool:
        """Whether the deferred callbacks now running may stop the run (not at its end)."""
        return self.reads.can_stop

    # -- models and optimizers ---------------------------------------------------
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
        info.pre_handle = model.register_forward_pre_hook(self._fwd_pre, with_kwargs=True)
        return info

    def watch_optimizer(self, opt: torch.optim.Optimizer) -> OptInfo:
        """Hook ``opt``'s step (unless the session already hooks every optimizer)."""
        oi = self.optimizers.get(id(opt))
        if oi is None:
            oi = self.add_optimizer(opt)
            if not self.auto:
                oi.pre_handle = opt.register_step_pre_hook(self._opt_pre)
                self._handles.append(opt.register_step_post_hook(self._opt_post))
        return oi

    def add_optimizer(self, opt: torch.optim.Optimizer) -> OptInfo:
        """Know ``opt`` (name its parameters, start its clock) without hooking it: the hooks are
        :meth:`watch_optimizer`'s, or the global ones of an ``auto`` session."""
        oi = OptInfo(opt, f"{type(opt).__name__}#{len(self.optimizers)}", next_check=self.options.check_every)
        self.optimizers[id(opt)] = oi
        if self.unclocked:  # the session went idle before any step: this first step is not
            self.unclocked = False  # watched (its forward was not); the clock starts at the next
            oi.armed = False
            oi.next_check = 1
        for gi, group in enumerate(opt.param_groups):
            for pi, p in enumerate(group["params"]):
                self.param_names.setdefault(id(p), f"{oi.name}.param_groups[{gi}][{pi}] {tuple(p.shape)}")
        rates = getattr(self, "grouprates", None)
        if rates is not None:  # the rates its groups hold now (group-lr-not-applied, overt/guards/grouprates.py)
            rates.seen(opt)
        return oi

    def name_of(self, p: torch.Tensor) -> str:
        return self.param_names.get(id(p), f"parameter {tuple(p.shape)}")

    # -- optimizer hooks: the clock ----------------------------------------------------
    @never_break
    def _opt_pre(self, opt: torch.optim.Optimizer, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """Before a checked step (the hook is only installed then): gradients are final here --
        unless the step is given a closure (LBFGS, Lightning's automatic optimisation), which makes
        them inside ``step()``: then the closure is wrapped, and the checks run after its first call,
        on this step's gradients and before the optimizer uses them (before it, ``.grad`` still
        held the previous step's, so a finding named the wrong step and stopped one update late)."""
        oi = self.optimizers.get(id(opt))
        if oi is None:
            if PROBE_MARK in opt.__dict__:
                return None  # a probe's copy of the user's optimizer (optdef): not the program's step
            oi = self.add_optimizer(opt)
        if not oi.armed:
            return None
        closure = args[1] if len(args) > 1 else kwargs.get("closure")  # args[0] is the optimizer
        if callable(closure):
            checked = self._checked_closure(oi, closure)
            return ((args[0], checked, *args[2:]), kwargs) if len(args) > 1 else (args, {**kwargs, "closure": checked})
        self._before_checked_step(oi, closure is not None)
        if closure is None and aside.WINDOW is not None:  # torch's own step: the axes window's mode stays aside
            optaside.hold_through_step(opt, self._opt_pre, self._opt_post)
        return None

    def _before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        oi.closure_pending = False
        self._each("before_checked_step", oi, closure)
        self.reads.flush(can_stop=True)

    def _checked_closure(self, oi: OptInfo, closure: Callable[..., Any]) -> Callable[..., Any]:
        """``closure``, followed on its first call by the checks of the step (LBFGS calls it again
        for its line search: those later calls are not checked)."""
        oi.closure_pending = True

        def checked(*args: Any, **kwargs: Any) -> Any:
            result = closure(*args, **kwargs)
            if oi.closure_pending:
                with torch.no_grad():
                    self._closure_checks(oi)
            return result

        return checked

    @never_break
    def _closure_checks(self, oi: OptInfo) -> None:
        self._before_checked_step(oi, True)

    def _opt_post(self, opt: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        """After every optimizer step.  Unchecked steps cost a few attribute reads."""
        oi = self.optimizers.get(id(opt))
        if oi is not None and not oi.armed and not self.step_watchers:
            oi.steps += 1  # the fast path
            if oi.steps > self.step:
                self.step = oi.steps
            if oi.steps < oi.next_check:
                return
            self._rearm(oi)
            return
        self._opt_post_slow(opt)

    @never_break
    def _rearm(self, oi: OptInfo) -> None:
        oi.armed = True
        self._after_step(oi, was_armed=False)

    @never_break
    def _opt_post_slow(self, opt: torch.optim.Optimizer) -> None:
        oi = self.optimizers.get(id(opt))
        if oi is None:
            if PROBE_MARK in opt.__dict__:
                return  # a probe's copy of the user's optimizer (optdef): not the program's step
            oi = self.add_optimizer(opt)
        if self.step_watchers:
            self._call([(check, check.on_step) for check in self.step_watchers], oi)
        oi.steps += 1
        if oi.steps > self.step:
            self.step = oi.steps
        was_armed = oi.armed
        if was_armed:
            if oi.closure_pending:  # an optimizer that never called its closure: checked after the step
                self._closure_checks(oi)
            self._each("after_checked_step", oi)
            oi.next_check = clock.after_checked_step(oi, check_every=self.options.check_every,
                                                     warmup_steps=self.options.warmup_steps)
        oi.armed = clock.is_armed(oi, self.options.warmup_steps)
        if oi.armed or was_armed:
            self._after_step(oi, was_armed)

    def _after_step(self, oi: OptInfo, was_armed: bool) -> None:
        """The next step's checked state changed (or stays checked): hooks follow it."""
        armed = oi.armed if len(self.optimizers) == 1 else any(o.armed for o in self.optimizers.values())
        changed, self.armed = armed != self.armed, armed  # before on_arming: the checks read the new state
        self._each("on_arming", oi)
        if not self.auto:
            if oi.armed and oi.pre_handle is None:
                oi.pre_handle = oi.opt.register_step_pre_hook(self._opt_pre)
            elif not oi.armed and oi.pre_handle is not None:
                oi.pre_handle.remove()
                oi.pre_handle = None
        if changed:
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

    # -- end ---------------------------------------------------------------------
    def close(self, error: BaseException | None = None) -> list[Finding]:
        """Final reads and end-of-run checks; remove every hook; return the findings."""
        if self.closed:
            return self.reporter.findings
        self.closed = True
        try:
            self.reads.can_stop = False
            if error is None:
                self.reads.flush(can_stop=False)
                self._each("end_of_run")
                self.reads.flush(can_stop=False)
            else:
                self._each("on_crash", error)
                self.reads.clear()
        finally:
            self._each("remove_hooks")
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


__all__ = ["GuardSession"]
