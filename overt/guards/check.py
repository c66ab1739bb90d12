"""The interface between the guard session and its checks.

A check is a class with a ``name`` (the session attribute it is reachable as)
that overrides the hooks it needs; the session calls a hook only on the checks
that override it, in the order of :data:`overt.guards.registry.CHECKS`.  Every
call is made under the never-break policy: a check that raises is reported once
(``overt guard: internal error in check <name> ...``) and training goes on; a
:class:`~overt.guards.report.GuardError` raised on purpose (``session.stop``)
passes through.

What a check may use of the session (``self.s``): ``report``/``stop`` (findings),
``defer`` (a device value read at the next checked step, see
:mod:`overt.guards.deferred`), ``step``, ``armed``, ``models``, ``optimizers``,
``name_of``, ``batch_where``, ``options``, ``reporter.has`` and
``watch_steps``.  Hooks see the session's records of a model
(:class:`~overt.guards.watched.ModelInfo`) or an optimizer
(:class:`~overt.guards.watched.OptInfo`).

Forward hooks run only while the session's forward pre-hook is installed
(checked steps, and a few forwards after a phase change); nothing here runs
on an unchecked training step.  Through an evaluation phase the hook stays on, except on a
compiled model once no check's ``eval_looks_left`` wants more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

HOOKS = ("on_train_forward", "on_checked_forward", "on_eval_forward", "on_no_grad_forward", "on_eval_mode_forward",
         "on_eval_input", "on_forward_end",
         "on_checked_loss", "before_checked_step", "on_step", "after_checked_step", "on_arming", "end_of_run",
         "on_crash", "remove_hooks", "eval_looks_left")


class Check:
    """Base class of the checks: every hook does nothing."""

    name = ""  # the session attribute this check is reachable as (``session.<name>``)

    def __init__(self, session: GuardSession):
        self.s = session

    # -- forwards of a watched model (only while the session's forward hook is installed) ------
    def on_train_forward(self, info: ModelInfo, args: tuple) -> None:
        """A forward of a model in training mode with gradients enabled."""

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        """A training forward of a checked step (or of a model's first three forwards).
        ``light``: a middle warm-up step (see :func:`overt.guards.clock.light_step`): checks
        that compare checked steps with each other skip it."""

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        """A forward with gradients enabled of a model in eval mode."""

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        """A forward under ``torch.no_grad``/``inference_mode``."""

    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        """A forward of a model in eval mode, with or without gradients (called before ``on_eval_forward`` or
        ``on_no_grad_forward``)."""

    def on_eval_input(self, info: ModelInfo, args: tuple) -> None:
        """An evaluation forward (eval mode, or autograd off) with its arguments, after the hooks above."""

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        """The end of a checked, eval-mode or discovered forward (``failed``: it raised;
        ``output`` is then None)."""

    def eval_looks_left(self, info: ModelInfo) -> bool:
        """Asked after an evaluation forward of ``info`` (eval mode, or under ``no_grad``) that this
        check was shown: whether it wants to see more of them.  A check that listens to
        ``on_eval_forward``/``on_no_grad_forward`` answers from its own bound (its first N looks per
        model, one per evaluation pass, ...).  A compiled model runs eagerly while its forwards are
        looked at (:mod:`overt.guards.compiled`): once no check wants more, the rest of its evaluation
        phase runs compiled."""
        return False

    # -- loss calls ------------------------------------------------------------------------
    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        """A call of the ``torch.nn.functional`` loss ``name`` on a checked step, with gradients
        enabled (``inp``, ``target``: its first two arguments, tensors; ``args``/``kwargs``: the
        whole call, e.g. ``weight``)."""

    # -- optimizer steps -------------------------------------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        """Before a checked step: gradients are final, the weights unchanged.  The deferred
        reads are flushed right after this hook, so ``stop`` can still prevent the step."""

    def on_step(self, oi: OptInfo) -> None:
        """Before the step count moves, after *every* step while this check is registered
        with ``session.watch_steps(self, True)`` (unchecked steps take the slow path then)."""

    def after_checked_step(self, oi: OptInfo) -> None:
        """After a checked step (``oi.steps`` counts it)."""

    def on_arming(self, oi: OptInfo) -> None:
        """After a step: whether ``oi``'s next step is checked (``oi.armed``) is now known.
        Called after every checked step and when a check falls due; ``session.armed`` (whether any
        watched optimizer's next step is checked) is already the new state."""

    # -- the end ---------------------------------------------------------------------------
    def end_of_run(self) -> None:
        """The run ended normally: the last checks (deferred reads are flushed before and after)."""

    def on_crash(self, error: BaseException) -> None:
        """The run ended with ``error``: findings that explain it."""

    def remove_hooks(self) -> None:
        """Remove every hook this check installed (always called, last)."""
