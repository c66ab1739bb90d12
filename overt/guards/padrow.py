"""Guard on an embedding whose ``padding_idx`` is a real index (slug ``padding-idx-real-index``; issue 33,
round four).

An invariant of training: every row of an embedding table that the loss depends on can learn.
``nn.Embedding(n, d, padding_idx=p)`` pins row ``p`` (zero at initialisation) and never gives it a
gradient: right for a padding token, whose embedding the model is meant to ignore, and wrong when
``p`` is a real entity, relation, user or item (ibalazevic/TuckER#17: ``padding_idx=0`` on the
relation table, where relation 0 is a real relation; "This is a mistake").

Seen on checked steps, for the first :data:`LOOKS` qualifying calls of each such table: a lookup of
one index per example (a 1-D input, or ``(batch, 1)``), in training mode with gradients enabled,
in which some examples look up ``p``.  Padding pads sequences; one index per example has nothing
to pad.  A forward hook on the table registers a gradient hook on its output that sums the
gradient's magnitude at the examples that looked up ``p`` (device values, read with the checked
step's other values).  Reported when that gradient is not zero: the loss depends on row ``p``, and
``padding_idx`` throws its gradient away.  A decoder fed one token per step, whose finished
sequences are padded and ignored by the loss, gets a zero gradient there, and is silent; a
sequence input (``(batch, time)``) is never judged.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards import probing
from overt.guards.check import Check
from overt.guards.where import short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 8  # qualifying calls of each table looked at


class PaddingRowChecks(Check):
    name = "padrow"

    def __init__(self, session: Any):
        super().__init__(session)
        self.scanned: set[int] = set()
        self.handles: dict[int, Any] = {}  # id(table) -> forward hook handle
        self.looks: dict[int, int] = {}
        self.sums: dict[int, list[float]] = {}  # id(table) -> [lookups of p, gradient mass at p]
        self.done: set[int] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.scanned or not info.has_embedding:
            return
        self.scanned.add(id(info))
        for m in info.module.modules():
            if type(m) is nn.Embedding and m.padding_idx is not None and m.weight.requires_grad \
                    and id(m) not in self.handles:
                self.handles[id(m)] = m.register_forward_hook(self._hook(info))

    def _hook(self, info: ModelInfo):
        def hook(m: nn.Module, args: tuple, output: Any) -> None:
            try:
                self._look(info, m, args, output)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _look(self, info: ModelInfo, m: nn.Embedding, args: tuple, output: Any) -> None:
        if not self.s.armed or not m.training or not torch.is_grad_enabled():
            return
        n = self.looks[id(m)] = self.looks.get(id(m), 0) + 1
        if n > LOOKS:
            self._drop(m)
            return
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.is_floating_point() or not isinstance(output, torch.Tensor):
            return
        if x.dim() == 2 and x.shape[1] == 1:
            x = x[:, 0]
        if x.dim() != 1:
            self._drop(m)  # sequences of tokens: padding is what padding_idx is for
            return
        if x.numel() < 2 or not output.requires_grad:
            return
        at_pad = (x == m.padding_idx).detach()
        rows = len(x)

        def grad_hook(g: torch.Tensor) -> None:
            if probing.ACTIVE:  # a check's own backward, not the step's
                return
            try:
                g2 = g.detach().reshape(rows, -1)
                mass = (g2.abs().sum(1) * at_pad).sum()
                self.s.defer(torch.stack((at_pad.sum().float(), mass.float())), self._judge(info, m))
            except Exception as exc:  # never break the user's backward
                self.s.check_failed(self, exc)

        output.register_hook(grad_hook)

    def _judge(self, info: ModelInfo, m: nn.Embedding):
        step = self.s.step

        def callback(vals: list[float]) -> None:
            if id(m) in self.done:
                return
            sums = self.sums.setdefault(id(m), [0.0, 0.0])
            sums[0] += vals[0]
            sums[1] += vals[1]
            if sums[0] > 0 and sums[1] > 0:
                self.done.add(id(m))
                self._report(info, m, int(sums[0]), step)

        return callback

    def _report(self, info: ModelInfo, m: nn.Embedding, count: int, step: int) -> None:
        label = info.label(m)
        where = _defined_at(info.module, m) or label
        p = m.padding_idx
        self.s.report(
            "padding-idx-real-index",
            f"{label} (Embedding({m.num_embeddings}, {m.embedding_dim}, padding_idx={p})) is looked up one index "
            f"per example, {count} of them index {p} on checked steps, and the loss depends on those lookups (their "
            f"gradient is not zero): index {p} is a real entry, not padding, but padding_idx={p} pins its row at "
            "its initial zeros and drops its gradient, so every example about it is scored with an embedding that "
            "never learns.",
            fix=f"drop padding_idx={p} (or reserve an extra row for padding: Embedding({m.num_embeddings} + 1, ..., "
            f"padding_idx={m.num_embeddings}) and keep the real indices below it).",
            where=where, key=label, step=step,
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


def _defined_at(root: nn.Module, table: nn.Module) -> str | None:
    """``file:line`` of the ``padding_idx`` in the constructor of the module that holds ``table``."""
    for _, parent in root.named_modules():
        for attr, child in parent.named_children():
            if child is not table:
                continue
            try:
                lines, start = inspect.getsourcelines(type(parent))
                path = inspect.getsourcefile(type(parent))
            except (OSError, TypeError):
                return None
            if not path or type(parent).__module__.startswith("torch."):
                return None
            for i, line in enumerate(lines):
                if "padding_idx" in line and (f"self.{attr}" in line or f"{attr} =" in line):
                    return short_location(path, start + i)
            for i, line in enumerate(lines):
                if f"self.{attr} =" in line:
                    return short_location(path, start + i)
            return None
    return None
