"""Compiled models run eagerly while the guards look at their forwards.

TorchDynamo does not guard on module hooks (``torch._dynamo.config.skip_nnmodule_hook_guards``):
a compiled forward never runs a hook registered after it was traced -- on a submodule (a ReLU, a
softmax layer), or on the model itself when it is a ``torch.nn`` container such as
``nn.Sequential`` -- and keeps running the hooks that were there when it was traced (traced into
the graph, or called at a graph break), even once they are removed.  The guards place their forward hooks lazily (on
checked steps, at ``eval()`` switches, while discovering models), so under ``torch.compile``
most forward checks saw nothing after the first compiled call, or saw stale values.

The remedy: while a watched model's forwards are looked at (its forward pre-hook is installed:
:attr:`overt.guards.watched.ModelInfo.pre_handle`) or a session discovers models, a compiled
module around it runs the module it wraps, eagerly -- ``torch.compile(model)``'s
``OptimizedModule`` calls ``_orig_mod``, a module compiled in place (``model.compile()``) has its
``_compiled_call_impl`` set aside -- so every hook fires, with this call's values.  On the other
steps the compiled code runs as before: the same compiled graph (nothing is traced while a hook
is installed, so no hook is ever baked into a graph and nothing recompiles), at the cost of one
flag test per call of an ``OptimizedModule``.  The parameters are the same; eager and compiled
forwards differ by float rounding only.

Nothing here imports ``torch._dynamo`` (seconds of start-up): ``OptimizedModule`` is patched
once ``torch._dynamo`` is imported, i.e. when a session starts after the model was compiled, or
by ``torch.compile`` itself, which is wrapped while a session is active.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.unwrap import unwrap_model

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

#: id(ModelInfo) -> the watched models whose forwards are looked at now
LOOKING: dict[int, ModelInfo] = {}
#: ids of the sessions discovering models (``auto``: every compiled module runs eagerly meanwhile)
DISCOVERING: set[int] = set()
#: id(module) -> (module, its compiled ``_call_impl``) set aside while it is looked at
_SET_ASIDE: dict[int, tuple[Any, Any]] = {}
#: ``Module.compile`` calls made while a session was active (see :func:`_compiled_in_place`)
_COMPILES = 0
_patcher: Callable[..., None] | None = None
_patched_optimized = False


def looked_at(module: Any) -> bool:
    """Whether a forward of compiled ``module`` (what an ``OptimizedModule`` wraps) must run eagerly."""
    if DISCOVERING:
        return True
    key = id(unwrap_model(module))
    return any(key in info.sub_names for info in LOOKING.values())


def _optimized_call(orig: Any) -> Any:
    @functools.wraps(orig)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if (LOOKING or DISCOVERING) and looked_at(self._orig_mod):
            return _eager(self, args, kwargs)
        return orig(self, *args, **kwargs)

    return __call__


def _eager(opt_module: Any, args: tuple, kwargs: dict) -> Any:
    """``opt_module``'s call with the module it wraps run eagerly (the guards' hooks fire)."""
    key = id(unwrap_model(opt_module._orig_mod))
    for info in LOOKING.values():  # these models are compiled: their evaluation looks are bounded
        if key in info.sub_names:
            info.compiled = True
    if not (opt_module._forward_pre_hooks or opt_module._forward_hooks or opt_module._backward_hooks
            or opt_module._backward_pre_hooks):
        return opt_module._orig_mod(*args, **kwargs)
    # hooks of the user's on the compiled wrapper itself: its own call, with the eager module as forward
    own = opt_module.__dict__
    compiled_forward = own["forward"]
    own["forward"] = opt_module._orig_mod.__call__
    try:
        return torch.nn.Module.__call__(opt_module, *args, **kwargs)
    finally:
        own["forward"] = compiled_forward


def _compile_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def compile(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        _patch_optimized()
        target = args[0] if args else kwargs.get("model")
        owner = getattr(target, "__self__", None)
        if isinstance(owner, torch.nn.Module):
            _say_method_compiled(owner, getattr(target, "__name__", "forward"))
        return out

    return compile


#: the forward checks a compiled method of a watched model keeps from running
BLIND_UNDER_METHOD = ("train-mode-in-eval", "graph-in-eval", "batch-dependent-eval", "dead-activations",
                      "softmax-over-batch", "train-serve-skew", "eval-inputs-augmented", "graph-leak",
                      "non-finite (model inputs)")
_SAID: set[int] = set()


def _say_method_compiled(owner: Any, name: str) -> None:
    """``torch.compile(model.forward)`` on a watched model: a compiled function, not a module, so
    it cannot be run eagerly while the guards look; said once per model, at the compile."""
    from overt.guards.patches import ACTIVE
    from overt.guards.report import PREFIX

    for s in ACTIVE:
        info = next((i for i in s.models.values() if id(owner) in i.sub_names), None)
        if info is None or id(info) in _SAID:
            continue
        _SAID.add(id(info))
        try:
            print(f"{PREFIX}torch.compile({info.label(owner)}.{name}) compiles a method, not the module: the guards "
                  "cannot run it eagerly, so the checks that watch its forwards "
                  f"({', '.join(BLIND_UNDER_METHOD)}) see only what dynamo traced on its first call. "
                  "Compile the module instead: torch.compile(model) or model.compile().",
                  file=s.options.out(), flush=True)
        except (OSError, ValueError):  # a closed stream
            pass


def _module_compile_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _COMPILES
        out = orig(self, *args, **kwargs)
        _COMPILES += 1  # the watched models' modules are walked again at their next look
        if any(id(self) in info.sub_names for info in LOOKING.values()):
            _set_aside(self)  # compiled in place while its forwards are looked at
        return out

    return compile


def _patch_optimized() -> None:
    global _patched_optimized
    if _patched_optimized or _patcher is None or "torch._dynamo" not in sys.modules:
        return
    from torch._dynamo.eval_frame import OptimizedModule

    _patcher(OptimizedModule, "__call__", _optimized_call)
    _patched_optimized = True


def install(patch: Callable[..., None]) -> None:
    """Wrap ``torch.compile`` and ``nn.Module.compile``, and ``OptimizedModule.__call__`` when
    ``torch._dynamo`` is imported (``patch`` is :func:`overt.guards.patches._patch`: the first
    session installs, the last one's end restores)."""
    global _patcher, _patched_optimized
    _patcher = patch
    _patched_optimized = False
    patch(torch, "compile", _compile_wrapper)
    patch(torch.nn.Module, "compile", _module_compile_wrapper)
    _patch_optimized()


def uninstalled() -> None:
    """The last session ended: its patches are restored; in-place compiled modules get their
    compiled call back."""
    global _patcher, _patched_optimized
    _patcher = None
    _patched_optimized = False
    for module, impl in list(_SET_ASIDE.values()):
        _restore(module, impl)
    _SET_ASIDE.clear()
    LOOKING.clear()
    DISCOVERING.clear()


def _set_aside(module: Any) -> bool:
    impl = getattr(module, "_compiled_call_impl", None)
    if impl is not None:
        _SET_ASIDE[id(module)] = (module, impl)
        module._compiled_call_impl = None
        return True
    return False


def _restore(module: Any, impl: Any) -> None:
    if getattr(module, "_compiled_call_impl", None) is None:  # not compiled again meanwhile
        module._compiled_call_impl = impl


def looking(info: ModelInfo, on: bool) -> None:
    """``info``'s forwards are looked at from now on (``on``), or no longer."""
    if on:
        LOOKING[id(info)] = info
        _patch_optimized()
        if "torch._dynamo" in sys.modules:  # nothing can be compiled in place before
            for m in _compiled_in_place(info):
                if _set_aside(m) or id(m) in _SET_ASIDE:
                    info.compiled = True
    elif LOOKING.pop(id(info), None) is not None and _SET_ASIDE:
        for m in info.module.modules():
            entry = _SET_ASIDE.pop(id(m), None)
            if entry is not None and not any(id(m) in other.sub_names for other in LOOKING.values()):
                _restore(*entry)
            elif entry is not None:
                _SET_ASIDE[id(m)] = entry  # another watched model around it is still looked at


def _compiled_in_place(info: ModelInfo) -> list[Any]:
    """The modules of ``info``'s model that are compiled in place (``model.compile()``: a compiled
    ``_call_impl``, or one set aside now).  The model is walked at its first look and again only after a
    ``Module.compile`` call (:func:`_module_compile_wrapper` counts them): a look comes at every checked
    step, and a walk of every module costs microseconds per module."""
    walked = info.inplace_walk
    if walked is None or walked[0] != _COMPILES:
        found = [m for m in info.module.modules()
                 if getattr(m, "_compiled_call_impl", None) is not None or id(m) in _SET_ASIDE]
        walked = info.inplace_walk = (_COMPILES, found)
    return walked[1]


def discovering(session: Any, on: bool) -> None:
    """``session`` discovers models (its global forward pre-hook is installed), or no longer."""
    if on:
        DISCOVERING.add(id(session))
        _patch_optimized()
    else:
        DISCOVERING.discard(id(session))


__all__ = ["DISCOVERING", "LOOKING", "discovering", "install", "looked_at", "looking", "uninstalled"]
