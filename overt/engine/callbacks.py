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

A run: ``on_fit_start`` -> per epoch ``on_epoch_start`` -> steps -> ``on_validation_end``
-> ``on_epoch_end`` -> ... -> ``on_summary`` (every callback) -> ``on_fit_end`` (every callback);
``on_exception`` instead of the last two when the run fails.

This module is the whole contract between the engine and its plug-ins.  A callback reads the
trainer's public attributes (``model``, ``optimizer``, ``scheduler``, ``precision``, ``config``,
``device``, ``state`` (:class:`~overt.engine.state.TrainState`), ``total_steps``,
``steps_per_epoch``, ``last_metrics``, ``resumed_from``, ``parallel``
(:class:`~overt.engine.parallel.Parallel`: rank, world size, ``is_main``, the collectives and
who writes a checkpoint), with ``rank``, ``world_size`` and ``strategy`` as shortcuts), sets ``should_stop`` to end the run
at the next step boundary, and saves/restores the run through ``state_objects()``,
``state_dict()``/``load_state_dict()`` and ``load_rng_state()``; everything else it needs
comes as hook arguments.  Callbacks are called in the order given; no hook relies on
another callback having run before it in the same hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


class Callback:
    """Base class: override the hooks you need (see the module's docstring for what a
    callback may read and do)."""

    def on_fit_start(self, trainer: Trainer) -> None:
        """Before the first epoch (a resumed run's ``trainer.state`` is already loaded)."""

    def on_epoch_start(self, trainer: Trainer, epoch: int) -> None: ...

    def on_batch_start(self, trainer: Trainer, batch: Any, batch_index: int) -> None:
        """``batch``: the current micro-batch as the loader gave it (before the move to the device);
        ``batch_index``: its index in the epoch."""

    def on_after_backward(self, trainer: Trainer, loss: Any) -> None:
        """``loss``: the micro-batch's loss (device tensor, before the accumulation weight)."""

    def on_before_optimizer_step(self, trainer: Trainer) -> None:
        """Gradients are final and unscaled here; raising stops the run before the weights change."""

    def on_step_end(self, trainer: Trainer, logs: dict[str, Any]) -> None:
        """After optimizer step, gradient reset, per-step scheduler and (when due) ``on_log``.
        ``logs``: ``loss`` (the last micro-batch's loss, a device tensor), ``samples`` (in the
        window), ``grad_norm`` (device tensor: every step with clipping, logged steps without; else
        None), ``epoch_end`` (True when this step closed
        the epoch's last window: validation and ``on_epoch_end`` follow; known for sized loaders);
        read device values only every N steps."""

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        """Every ``log_every`` optimizer steps: interval means as python floats
        (``train/loss``, ``train/lr``, ``train/samples_per_sec``, ...), plus ``step`` and ``epoch`` (the
        epoch in progress counted from 1, as the console and ``metrics.jsonl`` count it; the ``epoch``
        argument of the epoch hooks is the 0-based index)."""

    def on_validation_end(self, trainer: Trainer, metrics: dict[str, float]) -> None: ...

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None: ...

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        """The run ended: finish your work and add your entries to ``summary`` (called on every
        callback before any ``on_fit_end``)."""

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        """``summary`` is complete (every ``on_summary`` ran): write it, print it, close files."""

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
