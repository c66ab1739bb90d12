"""Guard on optimizer steps that bypass the GradScaler (slug ``step-bypasses-scaler``).

``scaler.scale(loss).backward()`` leaves every gradient multiplied by the loss scale (65536 at
first); ``scaler.step(optimizer)`` divides it out (``unscale_``) before the optimizer steps.  A
direct ``optimizer.step()`` in between applies the scaled gradients: an update thousands of times
too large, and, when ``scaler.step`` follows, a second step.  The guard knows which scalers have
scaled a loss since their last ``update()`` (wrappers of ``GradScaler.scale`` and ``update``: a
flag each) and, before a checked step, reads the scaler's own record of the optimizer: a step
that ``scaler.step`` makes comes after ``unscale_``; one made directly finds the gradients still
scaled.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any, Callable

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

FLAG = "_overt_scaled"  # set on a GradScaler between scale() and update()


class ScalerChecks(Check):
    name = "scalers"

    def __init__(self, session: Any):
        super().__init__(session)
        self.scalers: list[Any] = []  # weak references to the scalers seen scaling a loss

    def seen(self, scaler: Any) -> None:
        if not any(ref() is scaler for ref in self.scalers):
            self.scalers.append(weakref.ref(scaler))

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if not self.scalers or getattr(oi.opt, "_step_supports_amp_scaling", False):
            return
        from torch.amp.grad_scaler import OptState

        for ref in self.scalers:
            scaler = ref()
            if scaler is None or not getattr(scaler, FLAG, False) or not scaler.is_enabled():
                continue
            state = scaler._per_optimizer_states.get(id(oi.opt))  # .get: the defaultdict gains no entry
            stage = state.get("stage") if state else OptState.READY
            if stage is not OptState.READY:
                continue  # scaler.step unscaled first (or unscale_ was called): the gradients are true
            scale = scaler._scale
            value = f" by {float(scale.item()):g}" if scale is not None and scale.numel() == 1 and \
                scale.device.type == "cpu" else ""
            self.s.report(
                "step-bypasses-scaler",
                f"{oi.name}.step() was called directly on gradients that GradScaler.scale() multiplied{value}: "
                "they were never unscaled, so this update is that many times too large (and scaler.step() "
                "afterwards steps a second time); inf/NaN steps are not skipped either.",
                fix="step through the scaler: scaler.step(optimizer); scaler.update() (call "
                "scaler.unscale_(optimizer) first if you clip or step yourself).",
                where=f"{oi.name}.step() at {user_location(1) or '?'}", key=oi.name,
            )
            return


def _scale_wrapper(active: list, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def scale(self: Any, outputs: Any) -> Any:
        out = orig(self, outputs)
        if active:
            setattr(self, FLAG, True)
            for s in active:
                s.scalers.seen(self)
        return out

    return scale


def _update_wrapper(active: list, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def update(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, FLAG, False):
            setattr(self, FLAG, False)
        return orig(self, *args, **kwargs)

    return update


def install(patch: Callable, active: list) -> None:
    """Install the wrappers with ``patch(owner, name, make)`` (:func:`overt.guards.patches._patch`)."""
    from torch.amp.grad_scaler import GradScaler

    patch(GradScaler, "scale", functools.partial(_scale_wrapper, active))
    patch(GradScaler, "update", functools.partial(_update_wrapper, active))
