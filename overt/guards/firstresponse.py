"""A loss mask over next-token predictions that skips the prediction made at the delimiter (slug
``response-mask-skips-first-token``; issue 33, round twenty).

Premise (one sentence): when a language model is trained on the span of each sequence after a delimiter (a
response after its prompt), the first prediction the loss trains is the one made *at* the delimiter -- it predicts
the span's first token; a loss that starts one position later (the input mask sliced ``[:, :-1]`` where the
predictions need ``[:, 1:]``) never trains the first token of any answer, and the model starts every answer with
an untrained token.

Observed on the first :data:`LOOKS` checked training forwards of a model whose first positional argument is a
``(batch, positions)`` integer tensor (token ids) and whose output is ``(batch, positions, vocabulary)`` logits
with a vocabulary larger than every id (a language-model head): a gradient hook on the output marks, per row,
the positions whose prediction the loss weighs (a non-zero gradient).  Per row, ``f`` is the first such position.
Reported (device values read with the checked step's others) when, in every one of at least :data:`MIN_ROWS` rows,
``f >= 2``, the token at ``f - 1`` is one and the same token in every row (the delimiter) and differs from the token
before it, while the tokens at ``f`` (the span's first tokens) are not all the same: the loss trains every
prediction after the delimiter's and not the delimiter's own.

Silent: a loss over every position (``f = 0``), a span that starts at a template or role token the same in every
row (the prediction at the template's last token is trained: the twin), masked-language models (the masked
positions hold one mask token), token classifiers (few classes, or the first position a class token), runs of
padding before the span (the token before ``f - 1`` is the same padding token), and models called with keyword
arguments only.  Not seen: masks that vary the span's start so that no single token precedes it in every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.untrainedread import seq_logits, token_ids
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 3  # checked training forwards looked at per model
MIN_ROWS = 8  # rows of a batch ("the same token in every row" of fewer proves little)


def _ids(args: tuple) -> torch.Tensor | None:
    """The model's token ids (:func:`overt.guards.untrainedread.token_ids`) with enough rows and positions."""
    x = token_ids(args)
    if x is None or x.shape[0] < MIN_ROWS or x.shape[1] < 3:
        return None
    return x


def skipped_delimiter(ids: torch.Tensor, trained: torch.Tensor, vocab: int) -> torch.Tensor:
    """Device values ``(found, delimiter token, first trained position of row 0)`` of the premise's test:
    ``trained`` is ``(batch, positions)``, True where the loss weighs the prediction made at that position."""
    rows = trained.shape[0]
    every = trained.any(1).all()
    f = trained.int().argmax(1)  # the first trained position of each row
    delim = ids.gather(1, (f - 1).clamp_min(0)[:, None])[:, 0]
    before = ids.gather(1, (f - 2).clamp_min(0)[:, None])[:, 0]
    first = ids.gather(1, f[:, None])[:, 0]
    found = (every & (f >= 2).all() & (delim == delim[0]).all() & (before != delim).all()
             & (first != first[0]).any() & (ids.max() < vocab) & torch.tensor(rows >= MIN_ROWS, device=ids.device))
    return torch.stack((found.float(), delim[0].float(), f[0].float()))


class FirstResponseChecks(Check):
    """Loss masks over next-token predictions that start one position after the delimiter."""

    name = "firstresponse"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}
        self.pending: dict[int, tuple[torch.Tensor, str | None]] = {}  # id(ModelInfo) -> (ids, call site)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.looks.get(id(info), 0) >= LOOKS or self.s.reporter.has("response-mask-skips-first-token", info.name):
            return
        ids = _ids(args)
        if ids is not None:
            self.pending[id(info)] = (ids.detach(), user_location(2))

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        got = self.pending.pop(id(info), None)
        if got is None or failed:
            return
        ids, site = got
        out = seq_logits(output)
        if out is None or out.shape[:2] != ids.shape or out.shape[2] < 2:
            return
        self.looks[id(info)] = self.looks.get(id(info), 0) + 1
        step, vocab = self.s.step, out.shape[2]

        def grad_hook(g: torch.Tensor) -> None:
            try:
                trained = (g.detach() != 0).any(-1)
                self.s.defer(skipped_delimiter(ids, trained, vocab), self._judge(info, step, site))
            except Exception as exc:  # never break the user's backward
                self.s.check_failed(self, exc)

        out.register_hook(grad_hook)

    def _judge(self, info: ModelInfo, step: int, site: str | None):
        s = self.s

        def callback(vals: list[float]) -> None:
            found, delim, first = vals
            if not found or s.reporter.has("response-mask-skips-first-token", info.name):
                return
            s.report(
                "response-mask-skips-first-token",
                f"the loss on {info.name}'s next-token predictions starts one position after the delimiter: in "
                f"every row the first prediction it weighs is the one made after token {int(delim)} (position "
                f"{int(first)} in the first row), which is the same token in every row and ends the untrained part, "
                "and the prediction made at that token -- the one that predicts the first token of the trained "
                "span -- gets no gradient. The model never learns how an answer begins, and generation starts "
                "every answer with an untrained token.",
                fix="shift the span's mask like the targets: for logits of x[:, :-1] predicting x[:, 1:], weigh the "
                "losses with mask[:, 1:] (the mask of the predicted tokens), not mask[:, :-1].",
                where=f"{info.name} forward" + (f" at {site}" if site else ""), key=f"mask:{info.name}", step=step,
            )

        return callback

    def remove_hooks(self) -> None:
        self.pending.clear()
