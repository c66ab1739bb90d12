"""Guard on softmax layers that normalise over the batch (slug ``softmax-over-batch``).

``nn.Softmax(dim=0)`` (or ``LogSoftmax``/``Softmin``; also ``dim=None`` on a 3-D input, which
PyTorch's legacy rule resolves to 0) is right for one unbatched sample, and wrong the moment a
batch goes through it: each class's probabilities then sum to 1 over the samples, not each
sample's over the classes (a policy that acts on single states and learns on a batch of them).
The model's softmax layers with such a ``dim`` get a forward pre-hook (only those layers, for
their first :data:`LOOKS` calls) that compares dimension 0 of their input with the batch of the
model's latest checked forward.

The same mistake made outside the model, on its outputs (``torch.softmax(model(x), dim=0)``,
``model(x).softmax(0)``), is seen in evaluation and on checked training steps (a REINFORCE loss
taking ``log_softmax(policy(states), 0)``).  ``torch.softmax``/``log_softmax`` (also
``torch.nn.functional``'s and the tensor methods) are wrapped for the whole of a checked step (for
the first :data:`OUT_LOOKS` of each model) and from a watched model's ``eval()`` until training
resumes; the outputs of those forwards (a ``(batch, classes...)`` output whose dimension 0 is the
batch of the forward's input) are remembered by identity, and a call over dimension 0 of such an
output (the tensor itself, a view of it, or a tensor of the latest output's very shape:
``logits / T``) is the bug.  Unchecked training steps run unwrapped.  Host metadata only.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.swapped import EvalOutputLooks, Swapped, batched_outputs, compiling
from overt.guards.watched import storage_ptr
from overt.guards.where import from_torch, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 50  # calls of each suspect layer looked at
OUT_LOOKS = 8  # evaluation forwards per model whose outputs are remembered
_FUNCTIONS = ((torch, "softmax"), (torch, "log_softmax"), (F, "softmax"), (F, "log_softmax"),
              (torch.Tensor, "softmax"), (torch.Tensor, "log_softmax"))
_SOFTMAX = (nn.Softmax, nn.LogSoftmax, nn.Softmin)


def _resolved_dim(m: nn.Module, ndim: int) -> int | None:
    dim = m.dim
    if dim is None:  # torch.nn.functional._get_softmax_dim
        return 0 if ndim in (0, 1, 3) else 1
    return dim + ndim if dim < 0 else dim


class SoftmaxDimChecks(EvalOutputLooks, Check):
    name = "softmax_dim"
    OUT_LOOKS = OUT_LOOKS

    def __init__(self, session: Any):
        super().__init__(session)
        self.scanned: set[int] = set()
        self.batch: dict[int, int] = {}  # id(ModelInfo) -> dimension 0 of its latest checked input
        self.handles: dict[int, Any] = {}  # id(layer) -> pre-hook handle
        self.calls: dict[int, int] = {}
        self.out_looks: dict[int, int] = {}  # id(ModelInfo) -> evaluation forwards whose outputs were remembered
        self.train_looks: dict[int, int] = {}  # id(ModelInfo) -> checked training forwards whose outputs were
        # (weakref, storage, shape, model, training) of the outputs remembered
        self.outputs: list[tuple[Any, int | None, tuple[int, ...], ModelInfo, bool]] = []
        self.out_hook = OneShotHook()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        x = next((a for a in args if hasattr(a, "dim") and hasattr(a, "shape")), None)
        if x is not None and x.dim() >= 2:
            self.batch[id(info)] = int(x.shape[0])
        n = self.train_looks.get(id(info), 0)
        if n < OUT_LOOKS and not self.out_hook.pending:  # the loss of this checked step: softmax over its batch?
            self.out_hook.clear_stale()
            self.train_looks[id(info)] = n + 1
            self.out_hook.place(info.module, self._remember(info))
        if id(info) in self.scanned:
            return
        self.scanned.add(id(info))
        for m in info.module.modules():
            if isinstance(m, _SOFTMAX) and m.dim in (0, None, -3, -2) and id(m) not in self.handles:
                self.handles[id(m)] = m.register_forward_pre_hook(self._pre(info))

    # -- softmax over dimension 0 of a model's evaluation outputs (EvalOutputLooks) -----------
    def on_train_forward(self, info: ModelInfo, args: tuple) -> None:
        if self in _WRAPPERS.listening and not self.s.armed:  # training resumed on an unchecked step
            self._unwrap()

    def on_arming(self, oi: Any) -> None:
        """The wrappers are in place for the whole of a checked step (``torch.log_softmax`` in
        ``log_softmax(model(x), 0)`` is looked up before the forward runs), and gone otherwise."""
        if self.s.armed and any(self.train_looks.get(id(m), 0) < OUT_LOOKS for m in self.s.models.values()):
            self._wrap()
        elif self in _WRAPPERS.listening:
            self._unwrap()

    def _looked_enough(self) -> None:
        done = all(self.out_looks.get(id(m), 0) >= OUT_LOOKS for m in self.s.models.values())
        if self in _WRAPPERS.listening and done:
            self._unwrap()  # every model's first evaluation outputs were looked at

    def _remember(self, info: ModelInfo):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            if not self.out_hook.fired():
                return
            try:
                for t in batched_outputs(args, output):
                    if t[0].numel() < 2 or (t.dim() == 2 and t.shape[0] == t.shape[1]):
                        continue  # one score per sample (pooling over a set), or a square sample-by-sample matrix
                    self.outputs = self.outputs[-3:] + [(weakref.ref(t), storage_ptr(t), tuple(t.shape), info,
                                                         bool(module.training))]
                    self._wrap()  # (already in place for a checked step or after eval())
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _wrap(self) -> None:
        _WRAPPERS.listen(self)

    def _unwrap(self) -> None:
        self.outputs = []
        _WRAPPERS.stop(self)

    def softmax_called(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        """A wrapped softmax function was called (``out``: its result); the wrappers call every listening
        check with ``outputs`` (also :mod:`overt.guards.outputlink`)."""
        x = args[0]
        if not isinstance(x, torch.Tensor) or x.dim() < 2:
            return
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if dim is not None and not isinstance(dim, int):
            return  # a named dimension
        resolved = (0 if x.dim() in (0, 1, 3) else 1) if dim is None else (dim + x.dim() if dim < 0 else dim)
        if resolved != 0:
            return
        storage = storage_ptr(x)
        latest = len(self.outputs) - 1
        for i, (ref, out_storage, shape, info, training) in enumerate(self.outputs):
            t = ref()
            same = t is not None and (t is x or (storage and storage == out_storage and tuple(x.shape) == shape))
            # or made from the latest output (``logits / T``, ``out.float()``): a tensor of its very shape
            if not same and not (i == latest and tuple(x.shape) == shape and x.is_floating_point()):
                continue
            loc = user_location(3) or ""
            self.s.report(
                "softmax-over-batch",
                f"{name}(dim={dim}) over the {tuple(x.shape)} {'training' if training else 'evaluation'} outputs "
                f"of {info.name} normalises over dimension 0, the batch of {x.shape[0]} samples: each class's "
                "values sum to 1 over the samples instead of each sample's over its classes, so every "
                + ("probability the loss and its gradients see" if training else "prediction")
                + " depends on the rest of its batch (and on the batch size and order).",
                fix=f"{name}(..., dim=-1): the class dimension.",
                where=f"{name} at {loc}" if loc else f"{name} on {info.name}'s outputs", key=f"call:{loc}",
            )
            self.outputs = []
            return

    def _pre(self, info: ModelInfo):
        def hook(m: nn.Module, args: tuple) -> None:
            try:
                self._look(info, m, args)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _look(self, info: ModelInfo, m: nn.Module, args: tuple) -> None:
        n = self.calls[id(m)] = self.calls.get(id(m), 0) + 1
        if n > LOOKS:
            self._drop(m)
            return
        x = args[0] if args else None
        if x is None or not hasattr(x, "dim") or x.dim() < 2:
            return
        batch = self.batch.get(id(info))
        if _resolved_dim(m, x.dim()) != 0 or batch is None or batch < 2 or x.shape[0] != batch:
            return
        label = info.label(m)
        self.s.report(
            "softmax-over-batch",
            f"{label} ({type(m).__name__}, dim={m.dim}) normalises a {tuple(x.shape)} input over dimension 0, the "
            f"batch of {batch} samples: each class's values sum to 1 over the samples instead of each sample's over "
            "its classes, so every output depends on the rest of the batch (dim=0 is right only for one "
            "unbatched sample).",
            fix=f"{type(m).__name__}(dim=-1): the class dimension, for one sample and for a batch alike.",
            where=label, key=label,
        )
        self._drop(m)

    def _drop(self, m: nn.Module) -> None:
        handle = self.handles.pop(id(m), None)
        if handle is not None:
            handle.remove()

    def remove_hooks(self) -> None:
        self._unwrap()
        self.out_hook.remove()
        for handle in self.handles.values():
            handle.remove()
        self.handles.clear()


def _wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def softmax(*args: Any, **kwargs: Any) -> Any:
        if compiling():  # traced by torch.compile: PyTorch's own call, no graph break
            return orig(*args, **kwargs)
        out = orig(*args, **kwargs)
        if args and not from_torch(sys._getframe(1)):
            for check in _WRAPPERS.listening:
                if check.outputs:
                    try:
                        check.softmax_called(orig.__name__, args, kwargs, out)
                    except Exception as exc:  # noqa: BLE001  never break the user's call over a check
                        check.s.check_failed(check, exc)
        return out

    return softmax


# the softmax functions, wrapped while some session's evaluation outputs are remembered
_WRAPPERS = Swapped(_FUNCTIONS, lambda orig, owner, name: _wrapper(orig))
