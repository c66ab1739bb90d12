"""Rules about numeric precision (``fp16-without-scaler``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.frameworks import framework_of
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_FP16 = ("torch.float16", "torch.half")
#: autocast contexts whose device type is their first argument, and their default dtype per device type
_BY_DEVICE = ("torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast")
_CUDA_FP16 = ("torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast")
_OWN_SCALERS = ("deepspeed", "apex")  # frameworks that scale float16 losses themselves


def _fp16(ix: FileIndex, call: ast.Call) -> bool:
    """Whether ``call`` opens a float16 autocast for sure: an explicit float16 dtype, or no dtype on CUDA
    (where autocast's default is float16); a dtype or device held in a variable is not judged."""
    q = ix.qualname(call.func) or ""
    if q not in _BY_DEVICE + _CUDA_FP16:
        return False
    enabled = kwarg(call, "enabled")
    if enabled is not None and not (isinstance(enabled, ast.Constant) and enabled.value is True):
        return False  # enabled by a flag: the flag's value is decided at run time
    pos = 1  # (device_type, dtype, ...) and cuda's (enabled, dtype, ...)
    dtype = kwarg(call, "dtype") or (call.args[pos] if len(call.args) > pos else None)
    if dtype is not None:
        return ix.qualname(dtype) in _FP16
    if q in _CUDA_FP16:
        return not call.args  # (enabled,) positional: a flag
    device = kwarg(call, "device_type") or (call.args[0] if call.args else None)
    return isinstance(device, ast.Constant) and isinstance(device.value, str) and device.value.split(":")[0] == "cuda"


def _scaled_here(ix: FileIndex) -> bool:
    """The file makes or uses a loss scaler (GradScaler, ``scaler.scale(loss)``) or trains through a
    framework that scales float16 losses itself."""
    text = "\n".join(ix.source_lines)
    if "GradScaler" in text or "loss_scale" in text or "scale_loss" in text:
        return True
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "scale" for c in ix.calls):
        return True
    return any(mod.split(".")[0] in _OWN_SCALERS for mod, _, _ in ix.imports.values() if mod)


def _backward_in(scope: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
               for n in ast.walk(scope))


@rule("fp16-without-scaler")
def fp16_without_scaler(ix: FileIndex) -> Iterator[Hit]:
    if "autocast" not in "\n".join(ix.source_lines) or _scaled_here(ix):
        return
    for node in ast.walk(ix.tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call) or not _fp16(ix, call):
                continue
            if framework_of(ix, call) is not None:
                continue  # Lightning, Accelerate, Fabric, the HF Trainer scale the loss themselves
            scope = ix.enclosing_function(call) or ix.tree
            if not _backward_in(scope):
                continue  # inference, or a backward elsewhere: not judged
            yield Hit("fp16-without-scaler", call,
                      f"`{dotted(call.func) or 'autocast'}` runs the forward in float16 and this function calls "
                      "backward() with no GradScaler anywhere in the file: float16 gradients below about 6e-8 "
                      "flush to zero, so small gradients vanish without an error or a NaN",
                      fix="scaler = torch.amp.GradScaler(); scaler.scale(loss).backward(); scaler.step(optimizer); "
                          "scaler.update() -- or autocast to torch.bfloat16, which needs no scaler")
