"""Guard on activation checkpointing whose recomputation is not the forward it replaces (slug
``checkpoint-recompute-differs``; issue 33, the wild corpus's w237).

An invariant of activation checkpointing: ``torch.utils.checkpoint.checkpoint(fn, *args)`` keeps no activation
of ``fn`` and runs ``fn`` again in the backward pass to rebuild them, so the gradients are those of the
forward only when the second run computes what the first one did.  PyTorch makes a stochastic ``fn`` repeat
itself by saving the torch random state at the forward and restoring it for the recomputation
(``preserve_rng_state=True``, the default).  With ``preserve_rng_state=False`` a block with dropout draws fresh
masks in the recomputation (allenai/OLMo-core#828): the loss is that of one network sample and the gradients
another's, and training degrades with no error.  The same holds for randomness that checkpoint never saves
(``random.random()`` or numpy in a stochastic-depth block, a module's own ``torch.Generator``) and for a block
whose output depends on state the forward changed (a call counter).

What is proved, on checked training steps only, for a few calls per call site: a wrapper of
``torch.utils.checkpoint.checkpoint`` (``checkpoint_sequential`` calls it too) runs the user's call, then runs
``fn`` once more on the same inputs under ``no_grad`` with the random state the recomputation will have: the
torch state saved before the forward when ``preserve_rng_state`` is true, the state the forward left
otherwise; Python's and numpy's as the forward left them.  Everything the probe moved is put back (every
random state, the buffers of the modules ``fn`` belongs to or closes over, e.g. BatchNorm's running
statistics), so the program's own draws and numbers are unchanged.  Not put back: a Python side effect of
``fn`` itself (a block that appends an auxiliary loss to a list runs the append once more on a probed call, as
its real recomputation does too).  An output that differs from the
forward's by more than :data:`TOL` of its norm (read with the next checked step) is reported at the call.
Silent: a deterministic block (no dropout, eval mode, dropout 0) with either setting, a stochastic block with
its torch random state preserved, a function no module can be found for (its buffers could not be put back),
evaluation and ``no_grad`` calls (nothing is recomputed).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import nn

from overt.guards import aside
from overt.guards.check import Check
from overt.guards.probeargs import fresh
from overt.guards.putback import restore_buffers, restore_host_random, save_buffers, save_host_random
from overt.guards.where import user_location

TOL = 1e-3  # relative difference of the recomputed output: dropout moves it by far more, numerics by far less
PROBES = 3  # checked calls probed per call site, over the run
PER_STEP = 4  # calls probed per checked step, over all sites
_OWN = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state")


def _modules(fn: Any) -> list[nn.Module]:
    """The modules whose code ``fn`` runs: ``fn`` itself, the module of a bound method, a partial's function
    and arguments, the modules a closure holds (alone or in a list)."""
    found: list[nn.Module] = []
    todo = [fn]
    seen: set[int] = set()
    while todo:
        f = todo.pop()
        if id(f) in seen or len(seen) > 32:
            continue
        seen.add(id(f))
        if isinstance(f, nn.Module):
            found.append(f)
            continue
        if isinstance(f, functools.partial):
            todo += [f.func, *f.args, *f.keywords.values()]
            continue
        owner = getattr(f, "__self__", None)
        if isinstance(owner, nn.Module):
            found.append(owner)
            continue
        for cell in getattr(f, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, nn.Module) or callable(v):
                todo.append(v)
            elif isinstance(v, (list, tuple)):  # checkpoint_sequential's segment: a list of the children
                todo += [m for m in v[:64] if isinstance(m, nn.Module)]
    return found


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _tensors(o)]
    return []


def _devices(args: tuple) -> list[torch.device]:
    return sorted({a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "cuda"},
                  key=str)


class RecomputeChecks(Check):
    name = "recompute"

    def __init__(self, session: Any):
        super().__init__(session)
        self.probed: dict[str, int] = {}
        self.done: set[str] = set()
        self.this_step = 0

    def after_checked_step(self, oi: Any) -> None:
        self.this_step = 0

    def wants(self, loc: str) -> bool:
        return loc not in self.done and self.probed.get(loc, 0) < PROBES and self.this_step < PER_STEP

    def call(self, orig: Callable, fn: Any, args: tuple, kwargs: dict, loc: str) -> Any:
        """The user's checkpoint call, then the probe of ``fn`` (never raising into the user's code)."""
        modules = _modules(fn)
        if not modules:
            return orig(fn, *args, **kwargs)
        preserve = bool(kwargs.get("preserve_rng_state", True))
        devices = _devices(args)
        before = torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices]
        out = orig(fn, *args, **kwargs)
        self.probed[loc] = self.probed.get(loc, 0) + 1
        self.this_step += 1
        try:
            self._probe(fn, args, kwargs, out, modules, preserve, devices, before, loc)
        except Exception as exc:  # noqa: BLE001  a guard never breaks the user's forward
            self.s.check_failed(self, exc)
        return out

    def _probe(self, fn: Any, args: tuple, kwargs: dict, out: Any, modules: list[nn.Module], preserve: bool,
               devices: list, before: tuple, loc: str) -> None:
        first = _tensors(out)
        if not first:
            return
        after = torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices]
        host = save_host_random()
        buffers = save_buffers(modules)
        inner = {k: v for k, v in kwargs.items() if k not in _OWN}
        cpu, cuda = before if preserve else after
        try:
            torch.set_rng_state(cpu)
            for d, state in zip(devices, cuda):
                torch.cuda.set_rng_state(state, d)
            with torch.no_grad(), aside.user_code():
                again = fn(*fresh(args), **fresh(inner))
        except Exception:  # noqa: BLE001  a function that cannot run again: nothing proved
            return
        finally:
            torch.set_rng_state(after[0])
            for d, state in zip(devices, after[1]):
                torch.cuda.set_rng_state(state, d)
            restore_host_random(host)
            restore_buffers(buffers)
        second = _tensors(again)
        if len(second) != len(first) or any(a.shape != b.shape for a, b in zip(first, second)):
            return
        with torch.no_grad():
            diff = torch.stack([(a.detach().float() - b.float()).norm() / (a.detach().float().norm() + 1e-12)
                                for a, b in zip(first, second)]).amax()
        self.s.defer(diff, self._judge(loc, preserve, type(modules[0]).__name__))

    def _judge(self, loc: str, preserve: bool, name: str) -> Callable[[list[float]], None]:
        def callback(vals: list[float]) -> None:
            if loc in self.done or not vals[0] > TOL:
                return
            self.done.add(loc)
            if not preserve:
                cause = ("the call passes preserve_rng_state=False and the checkpointed code draws from torch's random "
                         "generator (dropout, a random mask or noise), so the recomputation draws new numbers")
                fix = ("drop preserve_rng_state=False (the default True saves the random state at the forward and "
                       "restores it for the recomputation), or keep the random layers out of the checkpointed segment")
            else:
                cause = ("the checkpointed code draws randomness that checkpoint does not save and restore (Python's "
                         "random or numpy, a torch.Generator of its own) or reads state its forward changed, so the "
                         "recomputation computes something else")
                fix = ("draw the block's randomness from torch's global generator (torch.rand, nn.Dropout), which "
                       "preserve_rng_state=True restores, or make the decision once outside the checkpointed function "
                       "and pass it in as an argument")
            self.s.report(
                "checkpoint-recompute-differs",
                f"the activation checkpoint at {loc} ({name}) recomputes another output than its forward computed: "
                f"run again on the same inputs with the random state its recomputation will have, it returns a "
                f"result {vals[0]:.1%} (relative norm) away from the forward's. {cause[0].upper() + cause[1:]}. The "
                "backward pass rebuilds its activations from that second run, so the gradients belong to a different "
                "network than the one that produced the loss, and training degrades with no error.",
                fix=fix, where=f"checkpoint call at {loc}", key=loc)

        return callback


def _wrapper(active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def checkpoint(function: Any, *args: Any, **kwargs: Any) -> Any:
        if not active or not is_armed() or not torch.is_grad_enabled() or torch.compiler.is_compiling():
            return orig(function, *args, **kwargs)
        loc = user_location(2) or "torch.utils.checkpoint.checkpoint"
        for s in active:
            check = getattr(s, "recompute", None)
            if s.armed and check is not None and check.wants(loc):
                return check.call(orig, function, args, kwargs, loc)
        return orig(function, *args, **kwargs)

    return checkpoint


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``torch.utils.checkpoint.checkpoint`` with ``patch(owner, name, make)`` (a name imported before the
    session started keeps the original; ``overt run`` starts it before the script's imports)."""
    import torch.utils.checkpoint as ckpt

    patch(ckpt, "checkpoint", functools.partial(_wrapper, active, is_armed))
