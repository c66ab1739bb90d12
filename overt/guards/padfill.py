"""Guard on sequences padded with a real token's id (slug ``padding-fills-with-token``; issue 33, round nineteen).

An invariant of training on padded sequences: the positions that fill the short sequences up to the batch's (or
a fixed) length hold an id that no real token has, the one the model was told is padding.  A table built as
``nn.Embedding(n, d, padding_idx=p)`` declares ``p`` the padding id.  When the batches it looks up never hold
``p``, yet the ends of most of their rows are runs of one other id ``q`` of varying length (their padding), and
``q`` also stands inside rows, away from those runs, as a real token, then every padded position reads as the
token ``q``: the model cannot tell padding from that token, and whatever it pools over the sequence is diluted
by it (649453932/Chinese-Text-Classification-Pytorch#24: sentences padded with PAD's *id* and then mapped word
by word, so every padding position became the unknown word's id).

Seen on checked steps, for the first :data:`LOOKS` calls of each such table on a batch of id sequences (a 2-D
integer input ``(N, T)``, ``N >= 4``, ``T >= 4``): for each end of the rows (right padding, left padding), the
id most rows end with, the run of it at each row's end, the rows whose run is at least two positions, the
spread of the run lengths, the rows in which the id also occurs outside that run, and the count of ``p`` in the
batch (device values, read with the checked step's other values).  Reported when ``p`` never occurs, at least
half the rows end with a run of two or more, the run lengths differ by two or more (lengths vary: padding, not
a repeated closing token), and at least :data:`MIN_INSIDE` rows hold the id inside.  Batches padded with ``p``,
batches without padding, padding by an id that is nothing else (a second pad token), and tables without
``padding_idx`` (nothing declares what padding is) are silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.padrow import _defined_at

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 4  # qualifying calls of each table looked at
MIN_LEN = 4  # shortest sequence axis judged
MIN_ROWS = 4  # fewest rows judged
MIN_INSIDE = 2  # rows that must hold the filling id inside, away from their padding


def _end_runs(x: torch.Tensor, end: int) -> torch.Tensor:
    """Per row of ``x`` (N, T): ``[q, rows with a run of >= 2, longest run, shortest run, rows holding q
    elsewhere]`` for the id ``q`` most rows hold at column ``end`` (-1 or 0), as one float device vector."""
    q = x[:, end].mode().values
    is_q = x == q
    run = is_q.flip(1).cummin(1).values.flip(1) if end == -1 else is_q.cummin(1).values
    lengths = run.sum(1)
    inside = (is_q & ~run).any(1)
    return torch.stack((q.float(), (lengths >= 2).sum().float(), lengths.max().float(), lengths.min().float(),
                        inside.sum().float()))


class PadFillChecks(Check):
    name = "padfill"

    def __init__(self, session: Any):
        super().__init__(session)
        self.scanned: set[int] = set()
        self.handles: dict[int, Any] = {}  # id(table) -> forward hook handle
        self.looks: dict[int, int] = {}
        self.done: set[int] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.scanned or not info.has_embedding:
            return
        self.scanned.add(id(info))
        for m in info.module.modules():
            if isinstance(m, nn.Embedding) and m.padding_idx is not None and id(m) not in self.handles:
                self.handles[id(m)] = m.register_forward_hook(self._hook(info))

    def _hook(self, info: ModelInfo):
        def hook(m: nn.Module, args: tuple, output: Any) -> None:
            try:
                self._look(info, m, args)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _look(self, info: ModelInfo, m: nn.Embedding, args: tuple) -> None:
        if not self.s.armed or id(m) in self.done:
            return
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.is_floating_point() or x.dtype == torch.bool or x.dim() != 2 \
                or x.shape[0] < MIN_ROWS or x.shape[1] < MIN_LEN:
            return
        n = self.looks[id(m)] = self.looks.get(id(m), 0) + 1
        if n > LOOKS:
            self._drop(m)
            return
        x = x.detach()
        p = int(m.padding_idx) % m.num_embeddings  # a negative padding_idx counts from the end
        vals = torch.cat(((x == p).sum().float().reshape(1), _end_runs(x, -1), _end_runs(x, 0)))
        self.s.defer(vals, self._judge(info, m, p, x.shape[0], self.s.step))

    def _judge(self, info: ModelInfo, m: nn.Embedding, p: int, rows: int, step: int):
        def callback(vals: list[float]) -> None:
            if id(m) in self.done or vals[0] > 0:
                return
            for side, (q, padded, longest, shortest, inside) in (("end", vals[1:6]), ("start", vals[6:11])):
                if int(q) != p and padded * 2 >= rows and longest - shortest >= 2 and inside >= MIN_INSIDE:
                    self.done.add(id(m))
                    self._report(info, m, p, int(q), side, int(padded), rows, int(longest), int(inside), step)
                    return

        return callback

    def _report(self, info: ModelInfo, m: nn.Embedding, p: int, q: int, side: str, padded: int, rows: int,
                longest: int, inside: int, step: int) -> None:
        label = info.label(m)
        where = _defined_at(info.module, m) or label
        self.s.report(
            "padding-fills-with-token",
            f"{label} (Embedding({m.num_embeddings}, {m.embedding_dim}, padding_idx={m.padding_idx})) is looked up "
            f"on id sequences padded at their {side} with id {q} ({padded} of {rows} rows {'end' if side == 'end' else 'start'} "
            f"with a run of it, up to {longest} positions long), never with its padding_idx {p}, which no position "
            f"holds; id {q} also stands inside {inside} rows as a real token, so every padded position reads as "
            f"that token: the model cannot tell the padding from it, and everything it pools over a sequence "
            "carries the padding's share of it.",
            fix=f"pad with the padding token's id {p} (pad the words before mapping them to ids, or map the padding "
            f"to {p}), or, if the padding must stay {q}, give real tokens another id and set padding_idx={q} (or "
            "mask the padding out).",
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
