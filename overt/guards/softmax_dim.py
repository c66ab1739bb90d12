"""Guard on softmax layers that normalise over the batch (slug ``softmax-over-batch``).

``nn.Softmax(dim=0)`` (or ``LogSoftmax``/``Softmin``; also ``dim=None`` on a 3-D input, which
PyTorch's legacy rule resolves to 0) is right for one unbatched sample, and wrong the moment a
batch goes through it: each class's probabilities then sum to 1 over the samples, not each
sample's over the classes (a policy that acts on single states and learns on a batch of them).
The model's softmax layers with such a ``dim`` get a forward pre-hook (only those layers, for
their first :data:`LOOKS` calls) that compares dimension 0 of their input with the batch of the
model's latest checked forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import nn

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 50  # calls of each suspect layer looked at
_SOFTMAX = (nn.Softmax, nn.LogSoftmax, nn.Softmin)


def _resolved_dim(m: nn.Module, ndim: int) -> int | None:
    dim = m.dim
    if dim is None:  # torch.nn.functional._get_softmax_dim
        return 0 if ndim in (0, 1, 3) else 1
    return dim + ndim if dim < 0 else dim


class SoftmaxDimChecks(Check):
    name = "softmax_dim"

    def __init__(self, session: Any):
        super().__init__(session)
        self.scanned: set[int] = set()
        self.batch: dict[int, int] = {}  # id(ModelInfo) -> dimension 0 of its latest checked input
        self.handles: dict[int, Any] = {}  # id(layer) -> pre-hook handle
        self.calls: dict[int, int] = {}

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        x = next((a for a in args if hasattr(a, "dim") and hasattr(a, "shape")), None)
        if x is not None and x.dim() >= 2:
            self.batch[id(info)] = int(x.shape[0])
        if id(info) in self.scanned:
            return
        self.scanned.add(id(info))
        for m in info.module.modules():
            if isinstance(m, _SOFTMAX) and m.dim in (0, None, -3, -2) and id(m) not in self.handles:
                self.handles[id(m)] = m.register_forward_pre_hook(self._pre(info))

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
        for handle in self.handles.values():
            handle.remove()
        self.handles.clear()
