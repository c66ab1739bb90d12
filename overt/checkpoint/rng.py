"""Every random number generator a training process draws from: capture and restore.

Python's ``random``, numpy's global generator, torch on the CPU and torch on
each CUDA device.  The engine owns them (:mod:`overt.engine.seeding`); this
module names them for the checkpoint store.
"""

from overt.engine.seeding import capture_rng, restore_rng

__all__ = ["capture_rng", "restore_rng"]
