"""Guard on gradient clipping that acts on nothing (slug ``clip-without-gradients``).

``clip_grad_norm_``/``clip_grad_value_`` take an iterable of parameters.  Given a generator that
was already consumed (``params = model.parameters()`` passed to the optimizer, then to the clip),
or parameters that have no gradient yet (the clip placed before ``backward()``), they clip
nothing, return 0 and say nothing: the run trains unclipped.  On checked steps the wrappers look
at what the call receives (a generator is turned into a list first, as PyTorch does itself); an
empty list, or parameters none of which has a gradient once training has begun (an optimizer
stepped, or the watched models have gradients), is reported.

``clip-before-unscale`` (issue 33): the same calls, on checked steps, given gradients that a
``GradScaler`` scaled and that are not unscaled yet (the scaler scaled a loss since its last
``update()``, and its record of the optimizer holding these parameters says ``unscale_`` was not
called): the threshold is compared with gradients multiplied by the loss scale (65536 at first),
so the clip cuts every update to a tiny fraction, or does nothing where it was meant to.

``clip-after-step`` (issue 33, round three): the same calls, on checked steps, given gradients that
an optimizer's last checked ``step()`` already applied: every parameter of the clip that the
step's record holds still has the very gradient tensor it had before that step, at the same
version (no ``backward()``, reset or accumulation since). The step used them unclipped, and what
the clip rescales is thrown away by the next reset. :class:`ClipOrderChecks` keeps that record
(up to 8 parameters per optimizer, autograd metadata only, no device work).
Between checked steps the wrappers pass the call straight through.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

_RECORDED = 8  # parameters per optimizer whose gradient is recorded before a checked step


class ClipOrderChecks(Check):
    """The gradients each optimizer's latest checked step consumed: ``(steps before it, [(param, grad,
    grad version)])``, for :func:`_judge_after_step`."""

    name = "cliporder"

    def __init__(self, session: Any):
        super().__init__(session)
        self.consumed: dict[int, tuple[OptInfo, int, list[tuple[torch.Tensor, torch.Tensor, int]]]] = {}

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        rec = []
        for p in oi.params:
            g = p.grad
            if g is not None:
                rec.append((p, g, g._version))
                if len(rec) >= _RECORDED:
                    break
        self.consumed[id(oi.opt)] = (oi, oi.steps, rec)

    def remove_hooks(self) -> None:
        self.consumed.clear()


def _judge_after_step(sessions: list, name: str, params: list, where: str) -> None:
    with_grad = [p for p in params[:64] if getattr(p, "grad", None) is not None]
    if not with_grad:
        return
    for s in sessions:
        check = getattr(s, "cliporder", None)
        if check is None:
            continue
        for oi, steps, rec in list(check.consumed.values()):
            if oi.steps <= steps:
                continue  # that step has not run yet
            held = {id(p): (g, v) for p, g, v in rec}
            seen = [p for p in with_grad if id(p) in held]
            if not seen or any(p.grad is not held[id(p)][0] or p.grad._version != held[id(p)][1] for p in seen):
                continue
            s.report(
                "clip-after-step",
                f"torch.nn.utils.{name} clips gradients that {oi.name}.step() already applied: the {len(seen)} "
                "parameter(s) of the clip that the step held still have the very gradient tensors the step read, "
                "unchanged (no backward() since), so the step used them unclipped and the clipped values are "
                "thrown away by the next zero_grad(): the run trains as if it did not clip.",
                fix="clip between loss.backward() and optimizer.step(): loss.backward(); "
                "clip_grad_norm_(model.parameters(), max_norm); optimizer.step().",
                where=f"{name} at {where}" if where else name, key=f"after-step:{where or name}",
            )
            return


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


def _still_scaled(session: Any, params: list) -> Any:
    """A scaler that scaled the gradients of ``params`` and has not unscaled them (their optimizer's
    stage in the scaler is READY since its ``scale()``), or None."""
    refs = getattr(getattr(session, "scalers", None), "scalers", None)
    if not refs or not params:
        return None
    from torch.amp.grad_scaler import OptState

    from overt.guards.scaler import FLAG

    first = params[0]
    opts = [oi.opt for oi in session.optimizers.values() if any(p is first for p in oi.params)]
    for ref in refs:
        scaler = ref()
        if scaler is None or not getattr(scaler, FLAG, False) or not scaler.is_enabled():
            continue
        for opt in opts:
            state = scaler._per_optimizer_states.get(id(opt))  # .get: the defaultdict gains no entry
            if (state.get("stage") if state else OptState.READY) is OptState.READY:
                return scaler
    return None


def _judge_scaled(sessions: list, name: str, params: list, where: str) -> None:
    if not any(getattr(p, "grad", None) is not None for p in params):
        return
    for s in sessions:
        scaler = _still_scaled(s, params)
        if scaler is None:
            continue
        scale = scaler._scale
        value = f" ({float(scale.item()):g} now)" if scale is not None and scale.numel() == 1 and \
            scale.device.type == "cpu" else ""
        s.report(
            "clip-before-unscale",
            f"torch.nn.utils.{name} clips gradients that GradScaler.scale() multiplied by the loss scale{value} "
            "and that were not unscaled yet: the threshold is compared with scaled gradients, so the clip cuts "
            "every update to a sliver of its size (or does nothing where it should).",
            fix="call scaler.unscale_(optimizer) before clipping: scaler.scale(loss).backward(); "
            "scaler.unscale_(optimizer); clip_grad_norm_(...); scaler.step(optimizer); scaler.update().",
            where=f"{name} at {where}" if where else name, key=f"scaled:{where or name}",
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
            armed = [s for s in active if s.armed]
            where = user_location(2) or ""
            _judge(armed, name, params, where)
            _judge_scaled(armed, name, params, where)
            limit = args[0] if args else kwargs.get("max_norm", kwargs.get("clip_value"))
            if not (isinstance(limit, (int, float)) and math.isinf(limit)):  # an inf norm measures, clips nothing
                _judge_after_step(armed, name, params, where)
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
