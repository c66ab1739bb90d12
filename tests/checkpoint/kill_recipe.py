"""The digits recipe, made to interrupt itself for the kill/resume tests.

With ``OVERT_TEST_SIGNAL_AT=N`` (and optionally ``OVERT_TEST_SIGNAL=SIGTERM``, default SIGKILL;
``OVERT_TEST_SIGNAL_TWICE=S`` sends it again S seconds later) the process sends that signal to itself right
before its N-th forward pass (training and validation passes both count) -- a real signal,
delivered by the kernel at an arbitrary point inside a step.  With ``OVERT_TEST_NAN_AT=N`` the N-th
forward pass outputs NaN (a planted divergence, for the guards).  Without the variable it is the
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
        if os.environ.get("OVERT_TEST_SIGNAL_TWICE"):  # its value: seconds to wait before the second
            import time

            time.sleep(float(os.environ["OVERT_TEST_SIGNAL_TWICE"]))
            os.kill(os.getpid(), sig)
    inputs, target = batch
    output = model(inputs)
    if os.environ.get("OVERT_TEST_NAN_AT") and _calls == int(os.environ["OVERT_TEST_NAN_AT"]):
        output = output * float("nan")
    return output, target


def build(cfg):
    recipe = digits.build(cfg)
    recipe.forward = _forward
    if os.environ.get("OVERT_TEST_SIGNAL_AT_FINAL_WEIGHTS"):
        _signal_at_final_weights(signal.Signals[os.environ.get("OVERT_TEST_SIGNAL", "SIGTERM")])
    return recipe


def _signal_at_final_weights(sig: signal.Signals) -> None:
    """``OVERT_TEST_SIGNAL_AT_FINAL_WEIGHTS=1``: the process sends itself ``OVERT_TEST_SIGNAL`` right
    before the finished run's ``model.safetensors`` is written (after the last step, the way a
    preemption can land while the run writes its final files)."""
    import safetensors.torch

    original = safetensors.torch.save_model

    def save_model(*args, **kwargs):
        os.kill(os.getpid(), sig)
        return original(*args, **kwargs)

    safetensors.torch.save_model = save_model


def _kill_inside_saves() -> None:
    """``OVERT_TEST_KILL_IN_SAVE=N``: SIGKILL the process at the N-th file fsync of a checkpoint
    save (4 per save: model, state tensors, state.json, manifest) -- a crash in the middle of a save.

    ``OVERT_TEST_KILL_AT_SAVE_POINT=N``: SIGKILL at the N-th point of the checkpoint store's
    durable operations -- right before and right after each file fsync, folder fsync and rename
    (of a save, and of the deletion of an old checkpoint) -- in whichever thread runs it.
    ``OVERT_TEST_SAVE_POINTS_FILE=PATH`` writes the number of such points of the run at exit."""
    at_fsync = os.environ.get("OVERT_TEST_KILL_IN_SAVE")
    at_point = os.environ.get("OVERT_TEST_KILL_AT_SAVE_POINT")
    count_file = os.environ.get("OVERT_TEST_SAVE_POINTS_FILE")
    if not (at_fsync or at_point or count_file):
        return
    import atexit
    import types

    from overt.checkpoint import store

    fsyncs, points = [0], [0]

    def point() -> None:
        points[0] += 1
        if at_point and points[0] == int(at_point):
            os.kill(os.getpid(), signal.SIGKILL)

    def around(fn, is_file_fsync=False):
        def wrapped(*args):
            if is_file_fsync:
                fsyncs[0] += 1
                if at_fsync and fsyncs[0] == int(at_fsync):
                    os.kill(os.getpid(), signal.SIGKILL)
            point()
            result = fn(*args)
            point()
            return result
        return wrapped

    store.fsync_file = around(store.fsync_file, is_file_fsync=True)
    store.fsync_dir = around(store.fsync_dir)
    proxy = types.ModuleType("os")
    proxy.__dict__.update(os.__dict__)
    proxy.rename = around(os.rename)
    store.os = proxy
    if count_file:
        atexit.register(lambda: open(count_file, "w").write(str(points[0])))


_kill_inside_saves()
