"""Guard on a sequence loss that trains on the padding (slug ``loss-over-padding``; issue 33).

An invariant of training on padded sequences: the padding is not a target.  A token loss whose
targets keep the padding id where the padding is (no ``ignore_index`` for it, or labels padded with
the pad id instead of -100) spends a share of every batch teaching the model to predict padding
after padding: an easy, meaningless target that dilutes the loss and the gradient of the real tokens
(huggingface/transformers#2759, 01-ai/Yi#110, lucidrains/DALLE-pytorch#57).

Seen on checked steps, for ``cross_entropy``/``nll_loss`` whose integer targets form one row per
sequence of the forward's 2-D token ids (``(N, L)``, or flattened ``N * L``), in either of two ways:

- the padding of the targets and of the ids, each proven from the values alone (the id most rows end,
  or start, with, every occurrence of it in a contiguous run at that end, in at least half the rows;
  see :mod:`overt.guards.padding`), the same id in both, and not the loss's ``ignore_index``; ``L``
  may differ from the ids' length (a decoder's targets padded with the pad id of its source);
- targets aligned with the ids (``L`` equal to their length, or one less: targets shifted by one)
  that hold one value, not the ``ignore_index``, wherever the ids are padding: what a collate function
  wrote as the labels' padding (a token-classification batch whose labels are padded with the tag 0
  while its ids are padded with 1).  Targets that vary there (a decoder's own sequence) say nothing.

Counted on the device: targets that the loss counts and that lie in the padding, one per row left out
(the first padding position may be a real end-of-sequence target when the pad token is the end
token).  Reported, once per call site, when over at least two checked calls that share is 10% of the
counted targets or more.  Packed text (no padding provable), labels whose padding is the ignore
index: silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of
from overt.guards.padding import padding, token_ids

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

SHARE = 0.1
CALLS = 2


class PaddingLossChecks(Check):
    name = "padloss"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.ids: torch.Tensor | None = None
        self.sums: dict[str, list[float]] = {}  # call site -> [calls, padding targets trained, targets counted]
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        self.ids = token_ids(args)

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        ids = self.ids
        if ids is None or name not in ("cross_entropy", "nll_loss") or target.is_floating_point():
            return
        if target.dtype == torch.bool or target.device != ids.device:
            return
        n, t = ids.shape
        m = target.numel()
        if m % n or m // n < 4:  # one row of targets per sequence (its own length: a decoder's targets)
            return
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        ii = ignore_index_of(args, kwargs)
        tgt = target.detach().reshape(n, m // n)
        pad_t, id_t = padding(tgt)
        pad_x, id_x = padding(ids)
        same = pad_x.any() & pad_t.any() & (id_t == id_x) & (id_t != ii)
        trained = pad_t & (tgt != ii)
        extra = (trained.sum(1) - 1).clamp(min=0).sum() * same
        fill = id_t
        w = m // n
        if w in (t, t - 1):
            # the targets where the inputs are padding (label i of targets shifted by one is token i + 1's):
            # one value written there by the collate function, not the ignore index, is trained on too
            at = pad_x[:, t - w:]
            low = tgt.masked_fill(~at, torch.iinfo(tgt.dtype).max).amin()
            high = tgt.masked_fill(~at, torch.iinfo(tgt.dtype).min).amax()
            filled = at.any() & (low == high) & (low != ii) & ~same
            extra = torch.where(filled, ((at & (tgt != ii)).sum(1) - 1).clamp(min=0).sum(), extra)
            fill = torch.where(filled, low, fill)
        counted = (tgt != ii).sum()
        self.s.defer(torch.stack((extra, counted, fill, id_x)).float(), self._judge(name, loc, ii))

    def _judge(self, name: str, loc: str, ii: int):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            extra, counted, pad_id, input_pad = vals
            sums = self.sums.setdefault(loc, [0.0, 0.0, 0.0])
            sums[0] += 1
            sums[1] += extra
            sums[2] += counted
            if sums[0] < CALLS:
                return
            self.done.add(loc)
            if not sums[2] or sums[1] < SHARE * sums[2]:
                return
            share = 100 * sums[1] / sums[2]
            self.s.report(
                "loss-over-padding",
                f"F.{name} at {loc} trains on the padding: {int(sums[1])} of the {int(sums[2])} targets it counted "
                f"on checked steps ({share:.0f}%) are {_filled(pad_id, input_pad)}, and ignore_index={ii} does not "
                "exclude them. "
                "The model is taught to predict padding after padding: an easy, meaningless target that dilutes "
                "the loss and the gradient of the real tokens, and the loss no longer measures the text.",
                fix=(f"set the padded targets to the ignore index (labels[labels == pad_id] = -100, or "
                     f"labels.masked_fill(attention_mask == 0, -100)), or pass ignore_index={int(pad_id)} to the "
                     "loss." if pad_id == input_pad else
                     f"pad the targets with the loss's ignore index ({ii}) where the inputs are padding "
                     f"(labels.masked_fill(input_ids == {int(input_pad)}, {ii}), or the collate function's label "
                     f"padding value); ignore_index={int(pad_id)} is right only if {int(pad_id)} is no real "
                     "target."),
                where=f"F.{name} call at {loc}", key=loc)

        return callback


def _filled(pad_id: float, input_pad: float) -> str:
    if pad_id == input_pad:
        return (f"the padding id {int(pad_id)} at the padded end of their sequence (the same padding as the "
                "model's input ids)")
    return (f"the value {int(pad_id)} written wherever the model's input ids are padding (pad id {int(input_pad)}): "
            "the padding of the targets is a value the loss counts")
