"""The digits recipe, made to interrupt itself for the kill/resume tests.

With ``OVERT_TEST_SIGNAL_AT=N`` (and optionally ``OVERT_TEST_SIGNAL=SIGTERM``, default SIGKILL;
``OVERT_TEST_SIGNAL_TWICE=1`` sends it twice) the process sends that signal to itself right
before its N-th forward pass (training and validation passes both count) -- a real signal,
delivered by the kernel at an arbitrary point inside a step.  Without the variable it is the
plain digits recipe with accumulation, dropout, a per-step OneCycle schedule and clipping.
"""

from __future__ import annotations

import os
import signal

from overt.recipes import digits

defaults = {**digits.defaults, "epochs": 3, "batch_size": 32, "accumulate": 3, "clip_grad_norm": 1.0,
            "dropout": 0.2, "checkpoint_every_steps": 4, "progress": "off", "tensorboard": False}

_calls = 0


def _forward(model, batch):
    global _calls
    _calls += 1
    at = os.environ.get("OVERT_TEST_SIGNAL_AT")
    if at and _calls == int(at):
        sig = signal.Signals[os.environ.get("OVERT_TEST_SIGNAL", "SIGKILL")]
        os.kill(os.getpid(), sig)
        if os.environ.get("OVERT_TEST_SIGNAL_TWICE"):
            os.kill(os.getpid(), sig)
    inputs, target = batch
    return model(inputs), target


def build(cfg):
    recipe = digits.build(cfg)
    recipe.forward = _forward
    return recipe


def _kill_inside_saves() -> None:
    """``OVERT_TEST_KILL_IN_SAVE=N``: SIGKILL the process at the N-th file fsync of a checkpoint
    save (4 per save: model, state tensors, state.json, manifest) -- a crash in the middle of a save."""
    at = os.environ.get("OVERT_TEST_KILL_IN_SAVE")
    if not at:
        return
    from overt.checkpoint import store

    original, count = store.fsync_file, [0]

    def fsync_then_maybe_die(path):
        count[0] += 1
        if count[0] == int(at):
            os.kill(os.getpid(), signal.SIGKILL)
        original(path)

    store.fsync_file = fsync_then_maybe_die


_kill_inside_saves()
