"""What the loop says when the user's forward, loss or backward fails: the batch, where, the likely fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from overt.engine.state import TrainState
from overt.errors import OvertError


def batch_error(exc: BaseException, batch: Any, state: TrainState) -> OvertError:
    """PyTorch's error in forward/loss as an error that names the batch and a likely fix."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    fix = "check that the data, the model and the loss agree on shapes, dtypes and classes"
    lowered = text.lower()
    if type(exc).__name__ == "BackendCompilerFailed":
        fix = "torch.compile could not build the model: train with compile=false, or mend the compiler set-up"
        if any(ch.isspace() for ch in str(Path(torch.__file__).parent)):
            fix += (f" (torch is installed under a path with a space, {Path(torch.__file__).parent}: inductor's "
                    "C++ build does not quote it when linking; install torch in a path without spaces)")
    elif "expected more than 1 value per channel" in lowered:
        fix = ("a training batch of 1 sample reached a BatchNorm layer (the epoch's last, incomplete batch): "
               "set drop_last=true (the engine drops it from training only), or a batch size that divides the data")
    elif "out of bounds" in lowered or "target" in lowered and "out of" in lowered:
        fix = ("a label is outside [0, number of model outputs): make the model's last layer as wide as the "
               "number of classes, or remap the labels to 0..C-1")
    elif "mat1 and mat2" in lowered or "shape" in lowered or "size" in lowered:
        fix = "the batch's feature size does not match the model's first layer: check in_features vs the data"
    elif "dtype" in lowered or "expected scalar type" in lowered:
        fix = "convert the inputs to the model's dtype (usually float32) in the dataset"
    return OvertError(f"training failed in forward/loss: {type(exc).__name__}: {text}",
                      where=f"{_position(state)}; batch: {describe(batch)}", fix=fix)


def loss_error(loss: Any, state: TrainState) -> OvertError | None:
    """Name a loss that cannot be back-propagated (not a tensor, not a scalar); other errors pass."""
    where = _position(state)
    if not isinstance(loss, torch.Tensor):
        return OvertError(f"the loss function returned a {type(loss).__name__} ({loss!r}), not a tensor",
                          where=where, why="a Python number carries no gradient: nothing can be trained from it",
                          fix="return the loss tensor itself (do not call .item() or float() on it in loss_fn)")
    if loss.dim() != 0:
        return OvertError(f"the loss function returned a tensor of shape {tuple(loss.shape)}, not a scalar",
                          where=where, why="the engine back-propagates one number per batch",
                          fix='reduce it to the batch mean: use reduction="mean" (not "none"), or .mean() it in loss_fn')
    return None


def note_out_of_memory(exc: BaseException, batch: Any, state: TrainState) -> None:
    """Add where and the fix to an out-of-memory error as a note: it stays the same exception,
    so ``except torch.cuda.OutOfMemoryError`` still catches it."""
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(f"overt: out of memory in forward/loss at {_position(state)}; batch: {describe(batch)}\n"
                     "overt: fix: lower batch_size (keep the effective batch with accumulate=N), use "
                     "precision=bf16, or set activation_checkpointing")


def describe(batch: Any) -> str:
    """Shapes and dtypes of a (nested) batch: ``(tensor(32, 64) float32, tensor(32,) int64)``."""
    if isinstance(batch, torch.Tensor):
        return f"tensor{tuple(batch.shape)} {str(batch.dtype).replace('torch.', '')}"
    if isinstance(batch, (list, tuple)):
        return "(" + ", ".join(describe(b) for b in batch) + ")"
    if isinstance(batch, dict):
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in batch.items()) + "}"
    return type(batch).__name__


def _position(state: TrainState) -> str:
    return f"epoch {state.epoch}, batch {state.batch_index} (optimizer step {state.global_step})"


_INPLACE = re.compile(r"\[(?:torch\.)?(\w+) \[([\d, ]*)\]\], which is output (\d+) of (\w+)")
_NAN = re.compile(r"Function '(\w+)' returned nan values in its (\d+)th output")


def _op(node: str) -> str:
    """``ReluBackward0`` -> ``relu``; ``AddmmBackward0`` -> ``addmm``; ``Sigmoid`` -> ``sigmoid``."""
    return re.sub(r"Backward\d*$", "", node).lower() or node


def backward_error(exc: BaseException, model: Any, state: TrainState) -> OvertError | None:
    """Explain the backward failures whose PyTorch message hides the cause: a tensor autograd saved
    was modified in place, and (under ``debug_anomaly``) the first operation whose gradient is NaN."""
    text = str(exc)
    where = _position(state)
    found = _INPLACE.search(text)
    if "modified by an inplace operation" in text:
        kind, shape, _, node = found.groups() if found else ("tensor", "?", "0", "?")
        inplace = [name or type(model).__name__ for name, m in model.named_modules() if getattr(m, "inplace", False) is True]
        suspects = (f"modules with inplace=True: {', '.join(inplace[:5])}" if inplace else
                    "no module has inplace=True, so look for an in-place tensor operation in forward or in the loss "
                    "(x += y, x[mask] = v, x.relu_(), x.mul_(), torch.relu(x, inplace=True))")
        return OvertError(
            f"backward failed: a tensor autograd saved for the gradient (the [{shape.replace(' ', '')}] {kind} "
            f"output of {_op(node)}, backward node {node}) was modified in place after it was saved",
            where=f"{where}; suspects: {suspects}",
            why="autograd needs the saved value to compute the gradient; the in-place write replaced it, so "
                "the gradient cannot be computed (PyTorch's message names the saved tensor, not the write)",
            fix="make that operation out of place (x = x + y instead of x += y; inplace=False; relu instead of "
                "relu_), or clone() the tensor before writing to it; to see the forward line that made the "
                "tensor, set debug_anomaly=true (torch.autograd.set_detect_anomaly(True) in your own loop)",
        )
    found = _NAN.search(text)
    if found:
        node, output = found.groups()
        return OvertError(
            f"backward produced NaN: {_op(node)} (backward node {node}) is the first operation whose gradient "
            f"is NaN (its output {output})",
            where=f"{where}; anomaly mode printed the forward line that called {_op(node)} just above "
                  f"('Error detected in {node}. Traceback of forward call ...')",
            why="one NaN gradient poisons every weight it reaches at the next optimizer step",
            fix=f"make the input of {_op(node)} safe at that line: e.g. log(x + 1e-8) or log of clamp(min=eps), "
                f"sqrt of clamp(min=eps), no division by zero; or lower the learning rate / set clip_grad_norm "
                f"if the values blew up before",
        )
    return None
