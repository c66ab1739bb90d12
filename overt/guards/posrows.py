"""Guard on position ids at evaluation that read rows training never read (slug ``eval-positions-shifted``; issue
33, round nineteen).

An invariant of every model with a learned position table: a position means one row.  A table whose training
lookups read, at each position ``j`` of the sequence, one row ``r_j`` -- the same in every sequence and every
step (``arange(T)``, or RoBERTa's ``arange(T) + padding_idx + 1``) -- learned ``r_j`` as position ``j``.  An
evaluation that reads another row at position ``j``, one that training never read at all, hands every evaluated
token a position vector the model never trained (an initial random row, the zero padding row): the model's
outputs at evaluation are not the ones it learned, and nothing fails (huggingface/sentence-transformers#3879:
0-based position ids from a flattening collator fed to a RoBERTa-style table that counts from
``padding_idx + 1``).

Seen on the embedding tables of a trained model: on the first :data:`TRAIN_LOOKS` lookups of checked training
steps with a 2-D integer input ``(N, T)``, ``T >= 4``, the row read at each position by the first sequence, whether
every sequence read it there, and the set of rows read (device tensors, kept on the device); then on the first
:data:`EVAL_LOOKS` lookups in evaluation (eval mode or autograd off), the row read at each position common to both
and whether every sequence read it there (device values, read with the next checked step or at the end of the
run).  Reported when, in training, every look read one row per position, the same rows in every look, and
consecutive rows (``r_j = r_0 + j``: a position table, not tokens or a broadcast id), and at evaluation some
position is read, by every sequence, at a row that is not its training row and that training never read.  Token
tables (rows vary along each position), position ids that follow the padding (they vary along a position),
evaluation with the training convention, a table read at positions past the trained length (the positions in
common only are compared) and tables with fewer than two training looks are silent.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.padrow import _defined_at
from overt.guards.where import short_location, user_frames

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

TRAIN_LOOKS = 4  # checked training lookups of each table recorded
EVAL_LOOKS = 2  # evaluation lookups of each table compared
MIN_LEN = 4  # shortest position axis judged


class _Table:
    """What training showed of one table (device tensors)."""

    def __init__(self, x: torch.Tensor, n: int):
        self.length = int(x.shape[1])
        self.rows = x[0].clone()  # the row read at each position by the first sequence
        self.fixed = (x == self.rows).all(0)  # whether every sequence read it there
        self.seen = torch.zeros(n, dtype=torch.bool, device=x.device)
        self.seen[x.reshape(-1)] = True
        self.looks = 1
        self.evals = 0

    def add(self, x: torch.Tensor) -> bool:
        """Record another training lookup; False when its length differs (not one position convention)."""
        if int(x.shape[1]) != self.length:
            return False
        self.fixed &= (x == self.rows).all(0)
        self.seen[x.reshape(-1)] = True
        self.looks += 1
        return True


class PositionRowChecks(Check):
    name = "posrows"

    def __init__(self, session: Any):
        super().__init__(session)
        self.scanned: set[int] = set()
        self.handles: dict[int, Any] = {}  # id(table) -> forward hook handle
        self.tables: dict[int, _Table] = {}
        self.done: set[int] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.scanned or not info.has_embedding:
            return
        self.scanned.add(id(info))
        for m in info.module.modules():
            if type(m) is nn.Embedding and id(m) not in self.handles:
                self.handles[id(m)] = m.register_forward_hook(self._hook(info))

    def _hook(self, info: ModelInfo):
        def hook(m: nn.Module, args: tuple, output: Any) -> None:
            try:
                self._look(info, m, args)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _look(self, info: ModelInfo, m: nn.Embedding, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.is_floating_point() or x.dtype == torch.bool or x.dim() != 2 \
                or x.shape[1] < MIN_LEN or x.shape[0] < 1:
            return
        x = x.detach()
        table = self.tables.get(id(m))
        if m.training and torch.is_grad_enabled():
            if not self.s.armed or (table is not None and table.looks >= TRAIN_LOOKS):
                return
            if table is None:
                self.tables[id(m)] = _Table(x, m.num_embeddings)
            elif not table.add(x):
                self._drop(m)
            return
        if table is None or table.looks < 2:
            return
        table.evals += 1
        if table.evals > EVAL_LOOKS:
            self._drop(m)
            return
        t = min(table.length, int(x.shape[1]))
        first = x[0, :t]
        fixed = (x[:, :t] == first).all(0)
        unseen = ~table.seen[first.clamp(0, m.num_embeddings - 1)]
        bad = table.fixed[:t] & fixed & (first != table.rows[:t]) & unseen
        vals = torch.cat((table.fixed[:t].all().float().reshape(1), bad.float(), first.float(),
                          table.rows[:t].float()))
        self.s.defer(vals, self._judge(info, m, t, _call_site()))

    def _judge(self, info: ModelInfo, m: nn.Embedding, t: int, where: str | None):
        def callback(vals: list[float]) -> None:
            if id(m) in self.done or vals[0] < 1:
                return
            bad = [j for j in range(t) if vals[1 + j] > 0]
            if not bad:
                return
            evals = [int(v) for v in vals[1 + t:1 + 2 * t]]
            trained = [int(v) for v in vals[1 + 2 * t:1 + 3 * t]]
            if any(r - trained[0] != j for j, r in enumerate(trained)):  # not consecutive: not positions
                return
            self.done.add(id(m))
            self._report(info, m, bad, evals, trained, where)

        return callback

    def _report(self, info: ModelInfo, m: nn.Embedding, bad: list[int], evals: list[int], trained: list[int],
                where: str | None) -> None:
        label = info.label(m)
        shifts = {e - r for e, r in zip(evals, trained)}
        shift = f" (every position shifted by {shifts.pop():+d} rows)" if len(shifts) == 1 else ""
        pad = f", padding_idx={m.padding_idx}" if m.padding_idx is not None else ""
        shown = ", ".join(f"position {j} reads row {evals[j]} (trained: {trained[j]})" for j in bad[:3])
        self.s.report(
            "eval-positions-shifted",
            f"{label} (Embedding({m.num_embeddings}, {m.embedding_dim}{pad})) is a position table: on checked training "
            f"steps every sequence read row {trained[0]}, {trained[1]}, ... {trained[-1]} at positions 0, 1, ... "
            f"{len(trained) - 1}; at evaluation every sequence reads rows {evals[0]}, {evals[1]}, ... "
            f"{evals[-1]} there{shift}, and {shown}: rows training never read, so the evaluated tokens get position "
            "vectors the model never learned (an initial random row, the zero padding row) and its outputs at "
            "evaluation are not the ones it trained.",
            fix="build the evaluation's position ids with the convention the model trained with (for a table that "
            "counts from padding_idx + 1, as RoBERTa's, add padding_idx + 1 to 0-based ids), or let the model make "
            "its own position ids.",
            where=where or _defined_at(info.module, m) or label, key=label,
        )
        self._drop(m)

    def _drop(self, m: nn.Module) -> None:
        handle = self.handles.pop(id(m), None)
        if handle is not None:
            handle.remove()
        self.tables.pop(id(m), None)

    def remove_hooks(self) -> None:
        for handle in self.handles.values():
            handle.remove()
        self.handles.clear()
        self.tables.clear()


def _call_site() -> str | None:
    """``file:line`` of the user's call of the model: the first user frame past the run of user frames that torch
    called (the model's own ``forward``s), from inside a forward hook."""
    frames = user_frames(sys._getframe(1))
    ends = [i for i, (_, last) in enumerate(frames) if last]
    if not frames or not ends:
        return None
    frame = frames[ends[0] + 1][0] if ends[0] + 1 < len(frames) else frames[ends[0]][0]
    return short_location(frame.f_code.co_filename, frame.f_lineno)
