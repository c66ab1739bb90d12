"""Guard on a residual block whose skip adds its input after a layer of the block overwrote it in place (slug
``residual-skip-missing``, issue 33, the wild corpus's w420).

Premise: a residual block ``y = x + F(x)`` adds its input as it was when the block was entered.  A layer of the
branch that writes into its own argument in place and returns another tensor (``nn.ReLU(inplace=True)`` opening
the branch, inside an ``nn.Sequential`` that returns its last layer's output) changes the block's ``x`` as a side
effect the block's code never sees: the sum that follows (``out += x``) adds the rectified input, the identity
path loses every negative value, and nothing fails (rosinality/vq-vae-2-pytorch#60).

What is observed, once per block class on the first checked training forward of a model: a submodule whose class
is the user's and is named residual (the words of :mod:`overt.guards.residualskip`) records its input's version
counter on entry (a Python integer, no synchronisation); only when the version moved by the block's exit is the
block run once more, under ``no_grad``, on a fresh copy of its input (its parameters as they are, its buffers as
copies, torch's random state put back), with hooks on its direct children and a dispatch mode that sees every
operation.  Reported when a child's forward moved the copy's version while returning a tensor that is not the
copy (a side-effect write), and an addition or subtraction of the block then read the copy: the skip carried the
overwritten input.  Silent on ``x += F(x)`` (the write is the sum itself), on ``x = self.act(x)`` with an in-place
activation (the child returns the input: the block's code rebinds the changed value knowingly), on a block that
copies its input for the skip before the branch runs (``identity = x.clone()``), and on writes after the sum.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from overt.guards import aside
from overt.guards.check import Check
from overt.guards.probeargs import fresh
from overt.guards.putback import RandomState
from overt.guards.residualskip import SLUG, _named_residual
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MAX_BLOCKS = 8  # block classes hooked per model
MAX_MODELS = 4
_SUMS = {"add", "add_", "sub", "sub_", "rsub"}


def _storage(t: Any) -> int | None:
    try:
        return t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else None
    except Exception:
        return None


def _user_line() -> str:
    """``file:line`` of the innermost frame of the user's code on the stack, or ""."""
    frame = sys._getframe(1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return short_location(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return ""


class _Reads(TorchDispatchMode):
    """Records the input's version, and the user's line, each time an addition or subtraction reads it (not as
    the tensor it writes)."""

    def __init__(self, x: torch.Tensor):
        super().__init__()
        self.x, self.ptr = x, _storage(x)
        self.versions: list[tuple[int, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in _SUMS:
            mutated = {i for i, a in enumerate(func._schema.arguments) if a.alias_info and a.alias_info.is_write}
            if any(i not in mutated and _storage(a) == self.ptr for i, a in enumerate(args)):
                self.versions.append((self.x._version, _user_line()))
        return func(*args, **kwargs)


class _ChildWrites:
    """Forward hooks on a block's direct children: the version of the input after the first child that wrote into
    it and returned another tensor, with that child's name."""

    def __init__(self, block: nn.Module, x: torch.Tensor):
        self.x, self.ptr = x, _storage(x)
        self.first: tuple[int, str] | None = None
        self.entered: list[int] = []
        self.handles = []
        for name, child in block.named_children():
            self.handles.append(child.register_forward_pre_hook(self._before))
            self.handles.append(child.register_forward_hook(self._after(name)))

    def _before(self, module: nn.Module, args: tuple) -> None:
        self.entered.append(self.x._version)

    def _after(self, name: str):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            before = self.entered.pop() if self.entered else self.x._version
            if self.first is None and self.x._version != before and _storage(output) != self.ptr:
                self.first = (self.x._version, name)
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


class SkipWriteChecks(Check):
    name = "skipwrite"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looked: set[int] = set()
        self.handles: list[Any] = []
        self.model: ModelInfo | None = None
        self.busy = False
        self.probed: set[type] = set()
        self.entry: dict[int, int] = {}

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.handles or id(info) in self.looked or len(self.looked) >= MAX_MODELS:
            return
        self.looked.add(id(info))
        blocks, classes = [], set()
        for name, m in info.module.named_modules():
            cls = type(m)
            if m is info.module or cls in classes or cls.__module__.startswith("torch.") or not _named_residual(cls):
                continue
            if not any(p.dim() >= 2 for p in m.parameters()) or not any(True for _ in m.children()):
                continue
            classes.add(cls)
            blocks.append((name, m))
            if len(blocks) >= MAX_BLOCKS:
                break
        if not blocks:
            return
        self.model = info
        for name, m in blocks:
            self.handles.append(m.register_forward_pre_hook(self._enter))
            self.handles.append(m.register_forward_hook(self._exit(info, name)))

    def _enter(self, module: nn.Module, args: tuple) -> None:
        # (another guard's probe runs the block again under no_grad, inside the real call: not the program's)
        if not self.busy and torch.is_grad_enabled() and len(args) == 1 and isinstance(args[0], torch.Tensor):
            self.entry[id(module)] = args[0]._version

    def _exit(self, info: ModelInfo, name: str):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            if self.busy or not torch.is_grad_enabled():
                return
            before = self.entry.pop(id(module), None)
            if before is None or type(module) in self.probed:
                return
            x = args[0]
            if x._version == before or not x.is_floating_point() or not isinstance(output, torch.Tensor):
                return
            self.probed.add(type(module))
            self._probe(info, name, module, x)
        return hook

    def _probe(self, info: ModelInfo, name: str, module: nn.Module, x: torch.Tensor) -> None:
        self.busy = True
        rng = RandomState([x.device])
        copy = fresh(x)
        params = {n: p for n, p in module.named_parameters()}
        params.update({n: b.detach().clone() for n, b in module.named_buffers()})
        writes = _ChildWrites(module, copy)
        reads = _Reads(copy)
        try:
            with torch.no_grad(), aside.user_code(), reads:
                torch.func.functional_call(module, params, (copy,))
        except Exception:
            return
        finally:
            writes.remove()
            rng.restore()
            self.busy = False
        if writes.first is None:
            return
        version, child = writes.first
        late = [where for v, where in reads.versions if v >= version]
        if late:
            self._report(info, name, module, child, late[0])

    def _report(self, info: ModelInfo, name: str, module: nn.Module, child: str, line: str) -> None:
        cls = type(module).__name__
        label = f"{info.name}.{name} ({cls})" if name else cls
        msg = (f"{label} is named a residual block, but the input its skip adds is not the input it was given: its "
               f"layer `{child}` writes into its argument in place (an in-place activation or another in-place "
               "operation at the start of the branch) and returns a new tensor, so the block's own input is "
               "overwritten as a side effect, and the sum of its forward adds the overwritten value (run once more "
               "on a copy of this step's input: an addition read the input after that write). The identity path carries the branch's first operation of the input (a ReLU drops "
               "every negative value), not the input itself: the block is no longer y = x + F(x), and the layer "
               "before it loses what the skip should pass on, with no error.")
        fix = (f"make the first operation of `{child}` out of place (nn.ReLU(inplace=False), F.relu(x) rather than "
               "relu_), or keep the input for the skip before the branch runs (identity = x.clone()).")
        self.s.report(SLUG, msg, where=line or label, fix=fix, key=f"skipwrite:{cls}")

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is self.model:
            self._unhook()
            self.model = None

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        self.entry.clear()

    def remove_hooks(self) -> None:
        self._unhook()


__all__ = ["SkipWriteChecks"]
