"""The engine's plug-in points.

The training loop in :mod:`overt.engine.loop` stays a readable canonical loop;
everything else (logging, progress, checkpoints, guards) is a :class:`Callback`
that the loop calls at fixed points.  A hook that is not overridden costs one
no-op call, so plug-ins pay only for what they do.  Hot-path hooks
(``on_after_backward``, ``on_before_optimizer_step``, ``on_step_end``) must not
synchronise with the device on every step.

Order inside one optimizer step (one accumulation window)::

    for each micro-batch:  on_batch_start -> forward/loss/backward -> on_after_backward
    precision.unscale -> on_before_optimizer_step -> clip -> optimizer.step
    zero_grad(set_to_none) -> scheduler.step (if per step) -> on_log (every log_every steps) -> on_step_end
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class Callback:
    """Base class: override the hooks you need. ``trainer`` exposes the model,
    optimizer, scheduler, precision plug-in, config and :class:`~overt.engine.state.TrainState`."""

    def on_fit_start(self, trainer: Trainer) -> None: ...

    def on_epoch_start(self, trainer: Trainer, epoch: int) -> None: ...

    def on_batch_start(self, trainer: Trainer, batch: Any, batch_index: int) -> None: ...

    def on_after_backward(self, trainer: Trainer, loss: Any) -> None: ...

    def on_before_optimizer_step(self, trainer: Trainer) -> None:
        """Gradients are final and unscaled here; raising stops the run before the weights change."""

    def on_step_end(self, trainer: Trainer, logs: dict[str, Any]) -> None:
        """After optimizer step, gradient reset, per-step scheduler and (when due) ``on_log``.
        ``logs``: ``loss`` (the last micro-batch's loss, a device tensor), ``samples`` (in the
        window), ``grad_norm`` (device tensor or None); read device values only every N steps."""

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        """Every ``log_every`` optimizer steps: interval means as python floats
        (``train/loss``, ``train/lr``, ``train/samples_per_sec``, ...), plus ``step`` and ``epoch``."""

    def on_validation_end(self, trainer: Trainer, metrics: dict[str, float]) -> None: ...

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None: ...

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        """Add to ``summary`` (it is written to summary.json after every callback ran)."""

    def on_exception(self, trainer: Trainer, error: BaseException) -> None: ...


HOOKS = tuple(name for name in vars(Callback) if name.startswith("on_"))


class CallbackList:
    """Calls each hook on every callback that overrides it, in order.

    Only overriding callbacks are called, so an unused hook costs an empty loop."""

    def __init__(self, callbacks: list[Callback]):
        self.callbacks = list(callbacks)
        self._hooks: dict[str, list[Any]] = {name: [] for name in HOOKS}
        for cb in self.callbacks:
            for name in HOOKS:
                if getattr(type(cb), name, None) is not getattr(Callback, name):
                    self._hooks[name].append(getattr(cb, name))

    def __iter__(self):
        return iter(self.callbacks)

    def hook(self, name: str) -> list[Any]:
        """The bound methods to call for ``name`` (for hot paths: fetch once, loop)."""
        return self._hooks[name]

    def call(self, name: str, *args: Any) -> None:
        for fn in self._hooks[name]:
            fn(*args)
