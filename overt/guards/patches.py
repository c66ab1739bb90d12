"""Process-wide instrumentation, installed while at least one guard session is active.

- the loss functions of ``torch.nn.functional`` (``nn`` loss modules call them);
  between checked steps they are the originals again unless a session wants a
  failing loss explained on every step (``overt.guard``, ``overt run``);
- ``next()`` on DataLoader iterators (batch index, time waiting for data, epochs, the end of a pass);
- ``DataLoader.__init__``, the iterators' ``__init__``/``_reset`` and ``Optimizer.__init__``: once per loader,
  pass or optimizer (:mod:`overt.guards.coverage`: where they were made, the indices of evaluation passes);
- ``torch.load`` (``weights_only=False`` is reported as ``unsafe-load``);
- ``LRScheduler.step`` (to find the schedulers that drive a watched optimizer);
- ``nn.Module.state_dict``/``load_state_dict`` and ``torch.save`` (:mod:`overt.guards.states`);
- ``GradScaler.scale``/``update`` (:mod:`overt.guards.scaler`), ``clip_grad_norm_``/``clip_grad_value_``
  (:mod:`overt.guards.clipping`), ``F.cosine_similarity`` (:mod:`overt.guards.stopgrad`, checked steps);
- ``F.grid_sample`` (:mod:`overt.guards.gridorder`, checked steps) and ``F.interpolate``
  (:mod:`overt.guards.labelresample`, checked steps);
- ``torch.utils.checkpoint.checkpoint`` (:mod:`overt.guards.recompute`, checked steps);
- ``numpy.argmax``/``argmin`` (:mod:`overt.guards.flatpick`; torch's through predshape's evaluation wrappers:
  a choice over a flat curve);
- ``torch.fliplr``/``rot90``/``roll`` and their tensor methods (:mod:`overt.guards.axisflip`: a call with the
  default axes notes its result);
- ``torch.autograd.backward`` (:mod:`overt.guards.termscale`, which also hands the loss to
  :mod:`overt.guards.maskpick` and :mod:`overt.guards.gradinv`): swapped in only while a checked step lasts;
- ``Optimizer.zero_grad``/``Module.zero_grad`` (:mod:`overt.guards.wastedgrad`): likewise;
- ``nn.Module.__getstate__`` (a pickled or deep-copied module leaves the guards' hooks out);
- ``nn.Module.train`` (when the mode changes) and entering
  ``torch.no_grad``/``inference_mode``: they arm the forward checks for the next
  few forwards (between checked steps the forward hook is not installed: it
  costs microseconds per call).

The wrappers are built once per process and reused by later sessions.

Every wrapper returns straight to PyTorch when no session is active, and
DataLoader worker processes never report (see :class:`~overt.guards.report.Reporter`).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.optim import lr_scheduler as _sched
from torch.utils.data import dataloader as _dl

from overt.guards import aside, plainfetch, termscale, wastedgrad
from overt.guards.blocksites import block_site
from overt.guards.report import GuardError
from overt.guards.unwrap import unwrap_model
from overt.guards.where import from_torch, from_torch_or_overt_file, is_user_file, user_location
from overt.guards.workers import check_worker_rngs

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

ACTIVE: list[GuardSession] = []
ARMED = False  # some active session is in a checked step: loss wrappers look at their arguments
EVAL_LOSSES: list[Any] = []  # checks that look at evaluation loss calls (outputlink.py), while an evaluation lasts
LOOK = False  # ARMED, or some check in EVAL_LOSSES: the loss wrappers do more than call the loss
_LOSSES_WRAPPED: bool | None = None  # what refresh() last made of the loss functions (None: not known)
_LOSS_PAIRS: list[tuple[str, Any, Any]] | None = None  # (name, original, wrapper) of the wrapped losses
_ORIGINALS: dict[tuple[Any, str], Any] = {}
_ARMED_PASSES = 3  # DataLoader passes over a dataset whose start re-arms the forward checks
LOSSES = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
          "binary_cross_entropy_with_logits", "kl_div", "binary_cross_entropy", "poisson_nll_loss",
          "multilabel_soft_margin_loss")


def safely(fn: Any, *args: Any) -> Any:
    """Run a check's method under the session's never-break policy: a failure is reported
    once (:meth:`~overt.guards.session.GuardSession.check_failed`) and the program goes on
    (a :class:`GuardError` that stops the run is not a failure).  While the axes window is open
    its function mode stands aside (:mod:`overt.guards.aside`)."""
    mode = aside.WINDOW
    token = aside.step_aside(mode) if mode is not None else None
    try:
        return fn(*args)
    except GuardError:
        raise
    except Exception as exc:
        check = getattr(fn, "__self__", None)
        session = getattr(check, "s", None)
        if session is not None:
            session.check_failed(check, exc)
        return None
    finally:
        if token is not None:
            aside.back(token)
        if aside.WINDOW is not mode:  # a window opened in this hook (model.eval()): its mode goes on the stack now
            aside.release(mode)


def _loss_wrapper(name: str, orig: Any) -> Any:
    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if LOOK:  # a checked step or an evaluation looked at; else the fast path: one global read
            for check in EVAL_LOSSES:  # an evaluation's loss calls (overt/guards/outputlink.py)
                safely(check.eval_loss, name, args, kwargs)
            if ARMED:
                return _checked(name, orig, args, kwargs)
        try:
            return orig(*args, **kwargs)
        except Exception:
            for s in ACTIVE:
                safely(s.losses.on_error, name, args, kwargs)
            raise

    wrapper.__overt_original__ = orig  # type: ignore[attr-defined]
    return wrapper


def _checked(name: str, orig: Any, args: tuple, kwargs: dict) -> Any:
    """A loss call on a checked step: the loss checks before and after it."""
    sessions = ACTIVE
    watch = [s for s in sessions if safely(s.losses.before, name, args, kwargs)]
    try:
        out = as_caller(orig, args, kwargs)  # a checked step: warnings at the caller
    except Exception:
        for s in sessions:
            safely(s.losses.on_error, name, args, kwargs)
        raise
    for s in watch:
        safely(s.losses.after, name, out)
    return out


def _loader_start(it: Any) -> Any:
    """A DataLoader pass begins: epoch boundary for the scheduler checks, arm the forwards,
    and note the index of the pass's last batch (-2: unknown).  Returns a torch function mode to fetch
    the first batch under (:mod:`overt.guards.datamut`), or None."""
    try:
        it._overt_last = len(it) - 1
    except TypeError:
        it._overt_last = -2
    key = id(getattr(it, "_dataset", it))
    workers = getattr(it, "_num_workers", 0)
    batch_size = getattr(getattr(it, "_index_sampler", None), "batch_size", None)
    for s in ACTIVE:
        s.loader_batch_size = batch_size if isinstance(batch_size, int) else None
        s.scheds.epoch_boundary()
        safely(s.samplers.pass_started, it)
        if workers > 1:
            safely(s.data.loader_started, workers)
        if workers:
            safely(check_worker_rngs, s, it)  # worker-rng-copied (overt/guards/workers.py)
        # a training epoch or an evaluation pass begins: look at its first forwards, for the
        # first passes over each dataset (later passes repeat the pattern; a mode switch or
        # no_grad still re-arms, and an evaluation phase keeps the hook on until training resumes)
        n = s.loader_passes.get(key, 0)
        if n < _ARMED_PASSES:
            s.loader_passes[key] = n + 1
            s.arm_forwards(3)
    tracer = None
    if not workers:  # data-mutated-by-reading (overt/guards/datamut.py): the stored data before the fetch
        for s in ACTIVE:
            datamut = getattr(s, "datamut", None)
            if datamut is not None:
                tracer = safely(datamut.before_fetch, it) or tracer
    return tracer


def _fetch_traced(orig: Any, it: Any, tracer: Any) -> Any:
    """The first batch of a pass fetched under ``tracer`` (a torch function mode)."""
    with tracer:
        return orig(it)


def _next_wrapper(orig: Any) -> Any:
    clock = time.perf_counter

    @functools.wraps(orig)
    def __next__(self: Any) -> Any:
        if not ACTIVE:
            return orig(self)
        index = self._num_yielded  # of the batch about to be returned
        tracer = None
        if not index:
            tracer = _loader_start(self)
        else:
            for s in ACTIVE:
                if not s.data.batches:  # this batch opens DataChecks' window: how long it waited for a CPU so far
                    s.data.mark_cpu_wait()
        t0 = clock()
        try:
            if tracer is not None:
                batch = _fetch_traced(orig, self, tracer)
            elif aside.WINDOW is None:
                batch = orig(self)
            else:  # the axes window is open: a fetch of torch's own code runs with its mode aside
                batch = plainfetch.fetch(orig, self)
        except StopIteration:  # the end of the pass (free when not raised): how much of the data it covered
            for s in ACTIVE:
                safely(s.coverage.pass_ended, self, index)
                safely(s.evaloverlap.pass_ended, self)
                orders = getattr(s, "orders", None)
                if orders is not None:
                    safely(orders.pass_ended, self)
            raise
        waited = clock() - t0
        if not index:  # once per pass: evaluation inputs that change between passes
            for s in ACTIVE:
                safely(s.evaldata.first_batch, self, batch)
                safely(s.evaldrop.first_batch, self)
                safely(s.evaloverlap.first_batch, self)
                datamut = getattr(s, "datamut", None)
                if datamut is not None and not self._num_workers:
                    safely(datamut.after_fetch, self, tracer)
        for s in ACTIVE:  # the batch index and DataChecks' counters, inline: this runs on every batch
            s.batch_index = index
            s.drawn += 1  # batches drawn from any loader (evalrepeat: a batch drawn between two forwards)
            if index:  # the first batch of a pass includes starting the workers: not counted
                d = s.data
                if not d.batches:
                    d.start = t0
                    d.workers = self._num_workers
                d.wait += waited
                d.batches += 1
        try:
            last = self._overt_last  # an attribute read, not a getattr() call: this runs on every batch
        except AttributeError:  # an iterator started before the session
            last = None
        if last is None:
            try:
                last = self._overt_last = len(self) - 1
            except TypeError:
                last = self._overt_last = -2
        if index == last:
            for s in ACTIVE:
                s.arm_forwards(1)  # the last batch may be a tiny one
        return batch

    return __next__


def _loader_init_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        if ACTIVE:  # where the loader was made: the line findings about its passes name
            self._overt_built = user_location(2)

    return __init__


def _iter_prepared(it: Any, loader: Any) -> None:
    """A DataLoader iterator was made (single process) or reset for a pass, before any index is drawn."""
    built = getattr(loader, "_overt_built", None)
    for s in ACTIVE:
        safely(s.coverage.prepared, it, built)
    if not getattr(it, "_overt_eval", True):  # a training pass: its first indices (overt/guards/orders.py)
        for s in ACTIVE:  # and the loader whose epochs' order is looked at (overt/guards/epochorder.py)
            epochorder = getattr(s, "epochorder", None)
            if epochorder is not None:
                safely(epochorder.prepared, it, loader)
        first = safely_taken(it)
        if first is not None:
            for s in ACTIVE:
                orders = getattr(s, "orders", None)
                if orders is not None:
                    safely(orders.prepared, it, first)


def safely_taken(it: Any) -> tuple[int, ...] | None:
    """:func:`overt.guards.orders.take_first` under the never-break policy (None when it fails)."""
    from overt.guards.orders import take_first

    try:
        return take_first(it)
    except Exception:
        return None


def _iter_init_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __init__(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, loader, *args, **kwargs)
        if ACTIVE:
            _iter_prepared(self, loader)

    return __init__


def _iter_reset_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def _reset(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        if ACTIVE:  # a worker-process iterator's first pass, or a persistent one's next pass: before its prefetch
            _iter_prepared(self, args[0] if args else kwargs.get("loader"))

    return _reset


def _optimizer_init_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        if ACTIVE:
            where = user_location(2)
            for s in ACTIVE:
                safely(s.coverage.optimizer_built, self, where)
                rates = getattr(s, "grouprates", None)
                if rates is not None:
                    safely(rates.built, self, where)  # group-lr-not-applied (overt/guards/grouprates.py)
                rebuilt = getattr(s, "optrebuilt", None)
                if rebuilt is not None:
                    safely(rebuilt.built, self, where)  # optimizer-state-discarded (overt/guards/optrebuilt.py)
                adapter = getattr(s, "adapterinit", None)
                if adapter is not None:
                    safely(adapter.built, self)  # adapter-not-identity-at-init (overt/guards/adapterinit.py)
                fitkept = getattr(s, "fitkept", None)
                if fitkept is not None:
                    safely(fitkept.built, self, where)  # diverged-fit-kept (overt/guards/fitkept.py): LBFGS fits
                orders = getattr(s, "orders", None)
                if orders is not None:
                    orders.built += 1  # a new run, for shuffle-order-repeats (overt/guards/orders.py)

    return __init__


def _load_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def load(*args: Any, **kwargs: Any) -> Any:
        if ACTIVE and kwargs.get("weights_only") is False and not from_torch(sys._getframe(1)):
            loc = user_location(2) or ""
            target = args[0] if args else kwargs.get("f", "?")
            for s in ACTIVE:
                s.report(
                    "unsafe-load",
                    f"torch.load({target!r}, weights_only=False) unpickles arbitrary objects: a "
                    "checkpoint from anyone else can run code on this machine.",
                    fix="save state_dicts "
                    "(or safetensors) and load with weights_only=True (the default since torch 2.6).",
                    where=f"torch.load at {loc}" if loc else "torch.load", key=loc or str(target),
                )
        if not ACTIVE:
            return orig(*args, **kwargs)
        return as_caller(orig, args, kwargs)

    return load


_warn = warnings.warn


def _warn_past_wrappers(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None,
                        **kwargs: Any) -> None:
    """``warnings.warn`` while :func:`as_caller` runs: a warning that would be attributed to a
    frame of this module (a wrapper) goes to the first frame above it, as without the wrapper."""
    extra = 0
    try:
        frame = sys._getframe(stacklevel)
    except ValueError:  # deeper than the stack: warnings.warn names sys then
        frame = None
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
        extra += 1
    _warn(message, category, stacklevel + 1 + extra, source, **kwargs)


def as_caller(fn: Any, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` called from a wrapper, with the warnings it attributes to the
    wrapper (``stacklevel=2``, e.g. torch.load's or a loss's) issued at the wrapper's caller,
    under the program's own filters and registries: the program prints what it prints
    unwrapped.  (``warnings.catch_warnings`` would not do: entering it makes every warning
    already shown once show again.)  For calls on checked steps or once in a while."""
    prev = warnings.warn
    warnings.warn = _warn_past_wrappers
    try:
        return fn(*args, **kwargs)
    finally:
        warnings.warn = prev


def _sched_step_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        for s in ACTIVE:
            if id(self) not in s.scheds.any_ids:
                s.scheds.add(self)
            safely(s.scheds.writes.before, self)  # a rate written by hand since its last step
        out = orig(self, *args, **kwargs)
        for s in ACTIVE:
            safely(s.scheds.writes.after, self)
        return out

    return step


#: how deep the running thread is in nested ``Module.train`` calls: ``model.eval()`` switches every
#: submodule through the same patched method, children first, and only the module the user (or
#: the framework) called is a model; its layers are not models of their own
_TRAIN_CALLS = threading.local()


def _train_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def train(self: Any, mode: bool = True) -> Any:
        # torch.compile's OptimizedModule sets ``training`` on the module it wraps: by the time that
        # module's own train() runs its mode has already changed, so the switch is seen here
        inner = unwrap_model(self) if ACTIVE and type(self).__name__ == "OptimizedModule" else self
        was = inner.training
        depth = getattr(_TRAIN_CALLS, "depth", 0)
        _TRAIN_CALLS.depth = depth + 1
        try:
            out = orig(self, mode)
        finally:
            _TRAIN_CALLS.depth = depth
        if ACTIVE and was != inner.training:  # model.train()/eval() switched: a phase begins
            for s in ACTIVE:
                if id(inner) in s.models:
                    s.arm_forwards(3)
                    # calls on its outputs (and the code that prepares its inputs), from the first
                    for name in ("softmax_dim", "pred_shape", "metric_probe", "ctc_blank", "axes", "output_link"):
                        check = getattr(s, name, None)
                        if check is not None and not inner.training:
                            safely(check.eval_started)
                elif s.auto and not inner.training and depth == 0:  # a model only evaluated: found when switched
                    s.discover_evaluated(self)
        return out

    return train


def _enter_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __enter__(self: Any) -> Any:
        out = orig(self)
        if ACTIVE:
            site = block_site()
            code = None if site is None else site[0]
            if code is None or not from_torch_or_overt_file(code.co_filename):
                # torch's and overt's own blocks (clip_grad_norm_, nn.init, the engine's gradient
                # norms at log points, the checks' probes) are no evaluation of the user's: arming
                # the forward hook there kept it installed on every step of a model with
                # Dropout/BatchNorm that clips (or on the steps after each log point), and a
                # compiled model ran eagerly on those steps
                for s in ACTIVE:
                    s.arm_forwards(2, only_dropbn_training=True)  # an evaluation without eval()?
            user = None
            for s in ACTIVE:
                armers, listeners = _arming_checks(s), _user_block_listeners(s)
                if not armers and not listeners:
                    continue
                if user is None:
                    user = code is not None and is_user_file(code.co_filename)
                if not user:
                    continue
                if armers and not s.block_sites.skip(site):
                    for check in armers:
                        if safely(check.no_grad_entered, self):
                            self._overt_site = site  # its exit gives back what no forward used
                for listener in listeners:
                    safely(listener)
        return out

    return __enter__


def _exit_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __exit__(self: Any, *exc: Any) -> Any:
        out = orig(self, *exc)
        site = getattr(self, "_overt_site", None)
        if site is not None:
            # a block of the user's whose entry armed a training-mode model's forward: what no forward
            # used is taken back, and a site that never evaluates stops being armed (blocksites.py)
            self._overt_site = None
            for s in ACTIVE:
                seen = []
                for name in _ARMING:
                    check = getattr(s, name, None)
                    if check is not None:
                        saw = safely(check.no_grad_exited, self)
                        if saw is not None:
                            seen.append(saw)
                s.block_sites.closed(site, any(seen) if seen else None)
        return out

    return __exit__


#: the checks whose ``no_grad_entered(block) -> bool`` arms a training-mode model's forward when the user's code
#: enters a ``no_grad`` block, and whose ``no_grad_exited(block)`` gives back what no forward used (blocksites.py)
_ARMING = ("skew", "independence", "evalrepeat")


def _arming_checks(s: GuardSession) -> list[Any]:
    """The checks of ``s`` that would arm a model at a user ``no_grad`` block now: an evaluation without
    ``eval()`` of a model without Dropout/BatchNorm (train/serve skew), or of a model the mode does not change
    (per-sample independence)."""
    found = []
    skew = getattr(s, "skew", None)
    if skew is not None and skew.wants_no_grad:
        found.append(skew)
    independence = getattr(s, "independence", None)
    if independence is not None and not independence.hook.pending and s.models:
        found.append(independence)
    evalrepeat = getattr(s, "evalrepeat", None)
    if evalrepeat is not None and evalrepeat.wants_no_grad:
        found.append(evalrepeat)
    return found


def _user_block_listeners(s: GuardSession) -> list[Any]:
    """The checks of ``s`` that want to hear when the user's code enters a ``no_grad``/``inference_mode``
    block (an evaluation may begin), as bound methods: the script's metrics, wrapped once it evaluates
    (metric probe); the script's decoders once a CTC loss was trained (ctc blank); the first model run once a
    model was trained with weights it does not train (fold: a merged model built after training)."""
    found = []
    probe = getattr(s, "metric_probe", None)
    if probe is not None and probe.wants_no_grad:
        found.append(probe.no_grad_entered)
    blank = getattr(s, "ctc_blank", None)
    if blank is not None and blank.loss:
        found.append(blank.no_grad_entered)
    fold = getattr(s, "fold", None)
    if fold is not None and fold.wants_no_grad:
        found.append(fold.no_grad_entered)
    return found


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks")
_HOOK_FLAGS = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


def _ours(hook: Any) -> bool:
    return getattr(hook, "__module__", "").startswith("overt.guards.")


def _getstate_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def __getstate__(self: Any) -> Any:
        """A module pickled (``torch.save(model)``) or deep-copied (an EMA copy) while the guards
        watch it: its state leaves the guards' forward hooks out, as if they were not there (the
        hooks hold the session, which neither pickles nor belongs in a copy)."""
        state = orig(self)
        ours = [k for name in _HOOK_DICTS for k, hook in state.get(name, {}).items() if _ours(hook)]
        if ours:
            for name in (*_HOOK_DICTS, *_HOOK_FLAGS):
                hooks = state.get(name)
                if hooks is not None:
                    state[name] = type(hooks)((k, v) for k, v in hooks.items() if k not in ours)
        return state

    return __getstate__


_WRAPPERS: dict[tuple[Any, str], tuple[Any, Any]] = {}  # built once per process: (original, wrapper)


def _patch(owner: Any, name: str, make: Any) -> None:
    orig = getattr(owner, name)
    _ORIGINALS[(owner, name)] = orig
    cached = _WRAPPERS.get((owner, name))
    if cached is None or cached[0] is not orig:
        cached = _WRAPPERS[(owner, name)] = (orig, make(orig))
    setattr(owner, name, cached[1])


def activate(session: GuardSession) -> None:
    """Register ``session``; install the wrappers for the first one."""
    global _LOSSES_WRAPPED, _LOSS_PAIRS
    _LOSSES_WRAPPED = None
    _LOSS_PAIRS = None
    if not ACTIVE:
        for name in LOSSES:
            if hasattr(F, name):
                _patch(F, name, functools.partial(_loss_wrapper, name))
        _patch(_dl._BaseDataLoaderIter, "__next__", _next_wrapper)
        _patch(_dl.DataLoader, "__init__", _loader_init_wrapper)  # coverage (overt/guards/coverage.py)
        _patch(_dl._SingleProcessDataLoaderIter, "__init__", _iter_init_wrapper)
        _patch(_dl._BaseDataLoaderIter, "_reset", _iter_reset_wrapper)
        _patch(torch.optim.Optimizer, "__init__", _optimizer_init_wrapper)
        _patch(torch, "load", _load_wrapper)
        _patch(_sched.LRScheduler, "step", _sched_step_wrapper)
        _patch(torch.nn.Module, "train", _train_wrapper)
        _patch(torch.nn.Module, "__getstate__", _getstate_wrapper)
        _patch(torch.no_grad, "__enter__", _enter_wrapper)
        _patch(torch.inference_mode, "__enter__", _enter_wrapper)
        _patch(torch.no_grad, "__exit__", _exit_wrapper)
        _patch(torch.inference_mode, "__exit__", _exit_wrapper)
        from overt.guards import states  # state_dict, load_state_dict, torch.save

        states.install(_patch, ACTIVE)
        from overt.guards import scaler  # GradScaler.scale, update

        scaler.install(_patch, ACTIVE)
        from overt.guards import clipping  # clip_grad_norm_, clip_grad_value_ (checked steps)

        clipping.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import attnmask  # F.scaled_dot_product_attention (checked steps)

        attnmask.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import stopgrad  # F.cosine_similarity (checked steps)

        stopgrad.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import ctcblank  # F.ctc_loss (checked steps)

        ctcblank.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import gridorder  # F.grid_sample (checked steps)

        gridorder.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import labelresample  # F.interpolate (checked steps; grid_sample's calls come from gridorder)

        labelresample.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import recompute  # torch.utils.checkpoint.checkpoint (checked steps)

        recompute.install(_patch, ACTIVE, lambda: ARMED)
        from overt.guards import flatpick  # torch/numpy argmax, argmin (CPU curves)

        flatpick.install(_patch, ACTIVE)
        from overt.guards import axisflip  # torch.fliplr, rot90, roll and their tensor methods (default axes)

        axisflip.install(_patch, ACTIVE)
        termscale.install(_patch, ACTIVE, safely)  # torch.autograd.backward (checked steps only: swapped in refresh)
        wastedgrad.install(_patch, ACTIVE, safely)  # Optimizer/Module.zero_grad (checked steps only: refresh)
        from overt.guards import deadterm  # Tensor.register_hook (the program's own hooks on a checked step)

        deadterm.install(_patch)
        from overt.guards import orders  # torch.manual_seed, random.seed, np.random.seed (shuffle-order-repeats)

        orders.install(_patch)
        from overt.guards import compiled  # torch.compile, Module.compile, OptimizedModule.__call__

        compiled.install(_patch)
    ACTIVE.append(session)
    refresh()


def refresh() -> None:
    """Recompute :data:`ARMED` after a session's checked/unchecked state changed.  Outside
    checked steps the loss wrappers only explain a loss that raises; when no active session
    wants that (the engine explains such errors itself), the original loss functions are put
    back until the next checked step: a wrapper costs a call with ``*args, **kwargs`` per loss."""
    global ARMED, LOOK, _LOSSES_WRAPPED
    ARMED = any(s.armed for s in ACTIVE)
    LOOK = ARMED or bool(EVAL_LOSSES)
    if not ACTIVE:
        return
    termscale.arm(ARMED)  # the backward wrapper: in place only while a checked step lasts
    if wastedgrad.STATE is not ARMED:  # the zero_grad wrappers, likewise (a call only when the state changes)
        wastedgrad.arm(ARMED)
    wrap = LOOK or any(s.explain_loss_errors for s in ACTIVE)
    if wrap is _LOSSES_WRAPPED:  # as set last time (twice per checked step: a loop over the losses saved)
        return
    _LOSSES_WRAPPED = wrap
    for name, orig, wrapper in _loss_pairs():
        current = getattr(F, name)
        if wrap and current is orig:
            setattr(F, name, wrapper)
        elif not wrap and current is wrapper:
            setattr(F, name, orig)


def _loss_pairs() -> list[tuple[str, Any, Any]]:
    """The loss functions :func:`refresh` swaps, with their originals and wrappers: looked up once per
    :func:`activate` (twice per checked step, eleven tuple-keyed lookups of two dicts saved)."""
    global _LOSS_PAIRS
    if _LOSS_PAIRS is None:
        pairs = []
        for name in LOSSES:
            orig = _ORIGINALS.get((F, name))
            cached = _WRAPPERS.get((F, name))
            if orig is not None and cached is not None and cached[0] is orig:
                pairs.append((name, orig, cached[1]))
        _LOSS_PAIRS = pairs
    return _LOSS_PAIRS


def eval_losses(check: Any, on: bool) -> None:
    """Whether ``check`` (an :class:`~overt.guards.outputlink.OutputLinkChecks`) sees the loss calls of an
    evaluation (its ``eval_loss(name, args, kwargs)``): from its evaluation's first forward until training
    resumes, only in runs whose training loss ignores an index that is not PyTorch's default."""
    if on == (check in EVAL_LOSSES):
        return
    if on:
        EVAL_LOSSES.append(check)
    else:
        EVAL_LOSSES.remove(check)
    refresh()


def deactivate(session: GuardSession) -> None:
    """Unregister ``session``; restore PyTorch when it was the last one."""
    global _LOSSES_WRAPPED, _LOSS_PAIRS
    _LOSSES_WRAPPED = None
    _LOSS_PAIRS = None
    if session in ACTIVE:
        ACTIVE.remove(session)
    if not ACTIVE:
        for (owner, name), orig in list(_ORIGINALS.items()):
            setattr(owner, name, orig)
        _ORIGINALS.clear()
        from overt.guards import compiled

        compiled.uninstalled()
        termscale.uninstalled()
        wastedgrad.uninstalled()
    refresh()
