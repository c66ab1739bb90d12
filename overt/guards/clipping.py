"""Guard on gradient clipping that acts on nothing (slug ``clip-without-gradients``).

``clip_grad_norm_``/``clip_grad_value_`` take an iterable of parameters.  Given a generator that
was already consumed (``params = model.parameters()`` passed to the optimizer, then to the clip),
or parameters that have no gradient yet (the clip placed before ``backward()``), they clip
nothing, return 0 and say nothing: the run trains unclipped.  On checked steps the wrappers look
at what the call receives (a generator is turned into a list first, as PyTorch does itself); an
empty list, or parameters none of which has a gradient once training has begun (an optimizer
stepped, or the watched models have gradients), is reported.
Between checked steps the wrappers pass the call straight through.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from overt.guards.where import user_location


def _judge(sessions: list, name: str, params: list, where: str) -> None:
    if params and any(getattr(p, "grad", None) is not None for p in params):
        return
    for s in sessions:
        training = s.step > 0 or any(p.grad is not None for info in s.models.values() for p in info.module.parameters())
        if not training or not s.optimizers:
            continue
        what = ("an empty iterable: a generator such as model.parameters() that was already consumed (by the "
                "optimizer's constructor, or an earlier clip)") if not params else \
            f"{len(params)} parameter(s), none of which has a gradient (the clip runs before backward(), or " \
            "after the gradients were reset)"
        s.report(
            "clip-without-gradients",
            f"torch.nn.utils.{name} was given {what}: it clipped nothing and returned 0, so the run trains "
            "unclipped while the code says it clips.",
            fix="pass a list that is not used up (params = list(model.parameters())) or model.parameters() "
            "itself at the call, between loss.backward() and optimizer.step().",
            where=f"{name} at {where}" if where else name, key=where or name,
        )


def _wrapper(name: str, active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
        if not active or not is_armed():
            return orig(parameters, *args, **kwargs)
        if isinstance(parameters, torch.Tensor):
            params = [parameters]
        else:
            params = list(parameters)
            if params or isinstance(parameters, (list, tuple)):
                parameters = params  # an exhausted generator goes on as it is: PyTorch warns about it
        try:
            _judge([s for s in active if s.armed], name, params, user_location(2) or "")
        except Exception as exc:  # never break the user's call over a check
            for s in active:
                s.check_failed("check clip-without-gradients", exc)
        return orig(parameters, *args, **kwargs)

    return clip


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_`` with ``patch(owner, name, make)``."""
    import torch.nn.utils as utils

    for name in ("clip_grad_norm_", "clip_grad_value_"):
        if hasattr(utils, name):
            patch(utils, name, functools.partial(_wrapper, name, active, is_armed))
