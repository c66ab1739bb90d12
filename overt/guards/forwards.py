"""The forward hooks of a guard session: installed only while something will look.

A forward pre-hook costs a few microseconds per call, so a watched model's hooks are present
on checked steps, for a few forwards after a phase change (a loader started, a mode switched,
``no_grad`` entered) and while models are being discovered (``auto``), and removed otherwise.
:class:`ForwardHooks` is the part of :class:`~overt.guards.session.GuardSession` that decides
this and turns forwards into the checks' forward events.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from overt.guards import clock, compiled, patches
from overt.guards.modelinputs import as_positional
from overt.guards.never_break import compiler_disable, never_break
from overt.guards.unwrap import unwrap_model

_grad_enabled = torch.is_grad_enabled


class ForwardHooks:
    """Forward hooks of the watched models (a part of :class:`~overt.guards.session.GuardSession`;
    it uses the session's ``models``, ``armed``, ``depth``, ``step``, ``options`` and ``_each``)."""

    def _set_global_pre(self, on: bool) -> None:
        if on and self._global_pre is None:
            self._global_pre = nn.modules.module.register_module_forward_pre_hook(self._discover)
            compiled.discovering(self, True)
        elif not on and self._global_pre is not None:
            self._global_pre.remove()
            self._global_pre = None
            compiled.discovering(self, False)

    @never_break
    def _discover(self, module: nn.Module, args: tuple) -> None:
        key = id(module)
        if self.depth or key in self.models or key in self._skip_roots or key in self._submodules:
            return
        if next(module.parameters(), None) is None:
            self._skip_roots.add(key)  # a loss or activation module called on its own
            return
        inner = unwrap_model(module)
        if inner is not module:
            # a DDP / FSDP1 wrapper around the user's module (Lightning's ddp strategy calls
            # ``training_step`` through it): watch the module it runs, whose train/eval mode is
            # the one the framework sets (Lightning restores the LightningModule's mode after
            # validation, not the wrapper's); the inner module's own pre hook fires next
            self._skip_roots.add(key)
            self.watch_model(inner)
            return
        self.watch_model(module)
        self._fwd_pre(module, args)  # its own pre hook was added too late for this call

    @never_break
    def discover_evaluated(self, module: nn.Module) -> None:
        """``module.eval()`` on a module the session does not know (``auto``): a model that is only
        evaluated (a copy, an EMA, a teacher) is watched from now on, whatever the clock says (its
        forwards happen between steps, where the global discovery hook is not installed)."""
        key = id(module)
        if key in self.models or key in self._skip_roots or key in self._submodules:
            return
        if next(module.parameters(), None) is None:
            return
        inner = unwrap_model(module)
        if id(inner) in self.models or id(inner) in self._submodules:
            return
        name = type(inner).__name__
        taken = sum(1 for info in self.models.values() if info.name.split("#")[0] == name)
        self.watch_model(inner, f"{name}#{taken + 1}" if taken else name)  # a copy of a watched model: told apart

    def discover_models(self, on: bool) -> None:
        """Watch the outermost modules with parameters that run a forward while ``on`` (PyTorch's
        global forward pre-hook): for frameworks that call a submodule, not the module they were
        given (a LightningModule's ``training_step`` calling ``self.net(x)``)."""
        self._set_global_pre(on)
        if not on:
            self.depth = 0

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
                info.pre_handle = info.module.register_forward_pre_hook(self._fwd_pre, with_kwargs=True)

    def _sync_forward_hooks(self) -> None:
        for info in self.models.values():
            if not self.armed and info.module.training and not info.dropbn:
                info.fwd_left = 0  # nothing to look at in its unchecked training forwards
            if self.armed and info.pre_handle is None:
                info.pre_handle = info.module.register_forward_pre_hook(self._fwd_pre, with_kwargs=True)
            elif not self.armed and info.fwd_left <= 0 and info.pre_handle is not None:
                info.pre_handle.remove()
                info.pre_handle = None

    @compiler_disable
    @never_break
    def _fwd_pre(self, module: nn.Module, args: tuple, kwargs: dict | None = None) -> None:
        info = self.models[id(module)]
        if not kwargs:
            self._fwd_pre_checks(module, info, args)
            return
        # a model called with keywords (``model(input_ids=..., attention_mask=...)``): the checks see the
        # arguments of the same call made positionally, and the keywords by name while the hooks run
        info.kwargs = kwargs
        try:
            self._fwd_pre_checks(module, info, as_positional(module, args, kwargs))
        finally:
            info.kwargs = {}

    def _fwd_pre_checks(self, module: nn.Module, info: Any, args: tuple) -> None:
        info.forwards += 1
        if self.armed and not self.optimizers and info.forwards > self.options.warmup_steps \
                and module.training and _grad_enabled():
            self._idle_without_optimizer()
        post = False
        if not module.training:
            self._each("on_eval_mode_forward", info, args)
        if _grad_enabled():
            if module.training:
                self._each("on_train_forward", info, args)
                if self.armed or info.forwards <= 3:
                    self._each("on_checked_forward", info, args, clock.light_step(self.step, self.options.warmup_steps))
                    post = True
            else:
                self._each("on_eval_forward", info, args)
                post = True
        else:
            self._each("on_no_grad_forward", info)
        if not module.training or not _grad_enabled():
            kwargs = info.kwargs
            # keywords that could not be made positional (a ``**kwargs`` forward): their values, as before
            self._each("on_eval_input", info, args if args or not kwargs else tuple(kwargs.values()))
        if self._global_pre is not None:  # discovering: track nesting so inner modules are not roots
            self.depth += 1
            post = True
        if post and info.post_handle is None:
            info.post_handle = module.register_forward_hook(self._fwd_post, always_call=True)
        if not self.armed:
            if _grad_enabled() and module.training:
                info.fwd_left -= 1
            elif info.compiled and not self._eval_wanted(info):
                # a compiled model runs eagerly while looked at: once no check wants more of its
                # evaluation forwards, the rest of the phase runs compiled (a training forward left in
                # eval mode is then seen at the next checked step, or the next pass's first forwards)
                info.fwd_left = 0
            elif info.fwd_left < 1:
                info.fwd_left = 1  # an evaluation phase: keep looking until training resumes
            if info.fwd_left <= 0 and info.pre_handle is not None:
                info.pre_handle.remove()
                info.pre_handle = None

    def _eval_wanted(self, info: Any) -> bool:
        """Whether some check wants to see more of ``info``'s evaluation forwards (a check that
        fails to say counts as wanting them)."""
        for check, fn in self._hooks["eval_looks_left"]:
            try:
                if fn(info):
                    return True
            except Exception as exc:  # never break the user's forward
                self.check_failed(check, exc)
                return True
        return False

    def _idle_without_optimizer(self) -> None:
        """Training forwards go on and no optimizer has stepped (a hand-written update, as in
        pytorch/examples' regression/main.py): with no step to clock the checks, the first
        ``warmup_steps`` forwards were checked and the session goes idle -- no forward hook, no
        loss wrapper -- until an optimizer steps (the global optimizer hooks stay)."""
        self.unclocked = True
        self.armed = False
        patches.refresh()
        self._sync_forward_hooks()
        if self.auto:
            self._set_global_pre(False)

    @compiler_disable
    @never_break
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
        self._each("on_forward_end", info, output, failed)
