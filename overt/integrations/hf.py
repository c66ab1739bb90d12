"""overt's runtime guards as a Hugging Face ``TrainerCallback`` (the ``hf`` extra).

Two lines::

    from overt.integrations.hf import OvertTrainerCallback
    trainer = Trainer(model, args, ..., callbacks=[OvertTrainerCallback()])

The guards watch the Trainer's model and the optimizer inside Accelerate's
``AcceleratedOptimizer``, with the same checks as ``overt.guard`` and ``overt train``.
Findings are printed to stderr as they are found (main process), numbered with the
Trainer's ``state.global_step``, added as ``overt/findings`` / ``overt/errors`` to the
Trainer's next log entry (so they are in ``state.log_history`` and ``trainer_state.json``,
and reach the reporting integrations that come after this callback), and written to
``args.output_dir/guards.json`` when training ends.  ``callback.findings`` holds them too.

Nothing raises into training: with ``stop_on_error=True`` an error finding (stale or
non-finite gradients) sets ``control.should_training_stop``, the Trainer's own graceful stop.
"""

from __future__ import annotations

from typing import Any, Sequence

from overt.errors import OvertError
from overt.findings import Finding
from overt.integrations.guarded import FrameworkGuards

EXTRA_HINT = ("pip install 'overt[hf]'   (the hf extra: transformers, accelerate, datasets)"
              "; from a checkout on a CPU-only machine: "
              "pip install -c constraints-cpu.txt -e '.[hf]' (keeps the CPU torch build)")

try:
    from transformers import TrainerCallback
except ImportError:
    raise OvertError("overt.integrations.hf needs Hugging Face transformers, which is not installed",
                     why="the Hugging Face integration is an optional extra of overt", fix=EXTRA_HINT) from None


class OvertTrainerCallback(TrainerCallback):
    """The runtime guards in a Hugging Face ``Trainer``.

    ``strict``: warnings count as errors; ``ignore``: slugs or codes to silence;
    ``check_every`` / ``warmup_steps``: how often the expensive checks (``overhead_budget``: ignored)
    run (see :class:`overt.guards.GuardOptions`); ``stop_on_error``: stop the Trainer
    gracefully after an error finding; ``stream``: where findings are printed (stderr)."""

    def __init__(self, *, strict: bool = False, ignore: Sequence[str] = (), check_every: int = 50,
                 warmup_steps: int = 5, overhead_budget: float | None = None, stop_on_error: bool = False,
                 stream: Any = None):
        self.guards = FrameworkGuards(strict=strict, ignore=ignore, check_every=check_every,
                                      warmup_steps=warmup_steps, overhead_budget=overhead_budget,
                                      stop_on_error=stop_on_error, stream=stream)
        self._unlogged = False

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the latest training."""
        return self.guards.findings

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       lr_scheduler: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            import io

            self.guards.options.stream = io.StringIO()  # other processes check silently
        self.guards.start(models=[model] if model is not None else [],
                          optimizers=[optimizer] if optimizer is not None else [],
                          schedulers=[lr_scheduler], step_source=lambda: state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.guards.step_done(state.is_world_process_zero)
        new = self.guards.new_findings()  # host integers: nothing else happens on a quiet step
        if new:
            self._unlogged = True
            if self.guards.should_stop(new):
                control.should_training_stop = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        # ``logs`` goes on to the callbacks after this one (the printer, later reporters); the
        # Trainer has just appended a copy of it (with "step") to state.log_history
        if self._unlogged and logs is not None and state.is_world_process_zero:
            counts = self.guards.counts()
            logs.update(counts)
            if state.log_history and state.log_history[-1].get("step") == state.global_step:
                state.log_history[-1].update(counts)
            self._unlogged = False

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        out_dir = getattr(args, "output_dir", None) if state.is_world_process_zero else None
        self.guards.finish(out_dir)
        self.guards.new_findings()
        if self.guards.findings and state.is_world_process_zero:
            state.log_history.append({**self.guards.counts(), "step": state.global_step})


__all__ = ["OvertTrainerCallback"]
