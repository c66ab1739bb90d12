"""Checkpoints you can resume exactly: atomic, verified, preemption-safe, safe to load.

- :class:`Checkpointer` -- save/restore any objects with ``state_dict`` plus every RNG,
  with a keep-last-K / keep-best-K policy and optional background writing.
- :func:`resume` -- continue a :class:`~overt.engine.loop.Trainer` from the newest valid
  checkpoint of its run directory (``overt resume RUN_DIR`` on the command line).
- :func:`load_weights` -- load weights into a (possibly changed) model, reporting missing,
  unexpected and mismatched keys; strict by default.

See ``docs/checkpoints.md`` for the format, the guarantees and their limits.
"""

from overt.checkpoint.callback import CheckpointCallback, find_checkpoint, restore_trainer, resume
from overt.checkpoint.checkpointer import Checkpointer, Restored
from overt.checkpoint.codec import CheckpointError
from overt.checkpoint.weights import LoadReport, load_weights

__all__ = ["CheckpointCallback", "CheckpointError", "Checkpointer", "LoadReport", "Restored", "find_checkpoint",
           "load_weights", "restore_trainer", "resume"]
