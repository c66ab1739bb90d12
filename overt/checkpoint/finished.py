"""Whether a checkpoint is the end of its run: ``overt resume`` (and ``overt sweep`` continuing a
sweep) leave a finished run as it is instead of training it again.

A run is finished when its checkpoint stands at an epoch boundary and either every configured
epoch is done or early stopping ended it (its count of validations without an improvement, saved
in ``train_state.callbacks["early_stop"]``, reached ``early_stop``).  The config is the saved
one with the command line's overrides on top, so ``overt resume RUN epochs=N`` still extends a run
and a larger ``early_stop=`` lets an early-stopped one go on.  A checkpoint written before the
early-stopping count was saved cannot tell an early stop apart: such a run is not called finished.
"""

from __future__ import annotations

from typing import Any


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def finished_because(restored: Any, overrides: dict[str, Any]) -> str | None:
    """Why the run of ``restored`` (a :class:`~overt.checkpoint.checkpointer.Restored`) is finished
    under its saved config with ``overrides``; ``None`` when it has training left (or it cannot be told)."""
    state = restored.objects.get("train_state")
    config = restored.meta.get("config")
    if not isinstance(state, dict) or not isinstance(config, dict):
        return None
    config = {**config, **overrides}
    epoch, batch = _int(state.get("epoch")), _int(state.get("batch_index"))
    if epoch is None or batch != 0:
        return None
    early = (state.get("callbacks") or {}).get("early_stop") if isinstance(state.get("callbacks"), dict) else None
    patience, bad = _int(config.get("early_stop")), _int((early or {}).get("bad")) if isinstance(early, dict) else None
    if (patience is not None and bad is not None and bad >= patience and isinstance(early, dict)
            and early.get("monitor") == config.get("monitor") and early.get("mode") == config.get("monitor_mode")):
        best, best_epoch = early.get("best"), _int(early.get("best_epoch"))
        return (f"it stopped early after epoch {epoch}: {early['monitor']} did not improve for {bad} validation(s)"
                + (f" (best {best:.6g} at epoch {best_epoch + 1})"
                   if isinstance(best, (int, float)) and best_epoch is not None else "")
                + f"; early_stop=N with N > {bad} would let it go on")
    epochs = _int(config.get("epochs"))
    if epochs is not None and epoch >= epochs:
        return f"it trained all {epochs} epoch(s); epochs=N with N > {epochs} would train it longer"
    return None
