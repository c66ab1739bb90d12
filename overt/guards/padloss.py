"""Guard on a sequence loss that trains on the padding (slug ``loss-over-padding``; issue 33).

An invariant of training on padded sequences: the padding is not a target.  A token loss whose
targets keep the padding id where the padding is (no ``ignore_index`` for it, or labels padded with
the pad id instead of -100) spends a share of every batch teaching the model to predict padding
after padding: an easy, meaningless target that dilutes the loss and the gradient of the real tokens
(huggingface/transformers#2759, 01-ai/Yi#110, lucidrains/DALLE-pytorch#57).

Seen on checked steps, for ``cross_entropy``/``nll_loss`` whose integer targets form one row per
sequence of the forward's 2-D token ids (``(N, L)``, or flattened ``N * L``), in one of three ways:

- the padding of the targets and of the ids, each proven from the values alone (the id most rows end,
  or start, with, every occurrence of it in a contiguous run at that end, in at least half the rows;
  see :mod:`overt.guards.padding`), the same id in both, and not the loss's ``ignore_index``; ``L``
  may differ from the ids' length (a decoder's targets padded with the pad id of its source);
- targets aligned with the ids (``L`` equal to their length, or one less: targets shifted by one)
  that hold one value, not the ``ignore_index``, wherever the ids are padding: what a collate function
  wrote as the labels' padding (a token-classification batch whose labels are padded with the tag 0
  while its ids are padded with 1).  Targets that vary there (a decoder's own sequence) say nothing;
- inputs corrupted where the loss has targets (masked language modelling, denoising: mask and random
  tokens break the ids' own padding): the padding proven on the sequence the targets restore (the target
  where the loss counts one, the input id elsewhere), its id filling at least half of those positions in
  the ids too, and the loss's classes covering every id (tokens predicted, not tags); counted targets
  inside it that are that id (the run's first position left out) are padding made targets (an MLM
  collator whose masking may choose padding, huggingface/transformers#11155, w254).

A target counts when the loss weighs it: not the ``ignore_index``, and, for a per-target loss
(``reduction="none"``) that the caller weighs afterwards (a loss mask multiplied in), one whose loss reaches the
gradient (a nonzero gradient of its logits, read by a hook on them during backward): a mask that zeroes the
padding after the call trains none of it.

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
        n = ids.shape[0]
        m = target.numel()
        if m % n or m // n < 4:  # one row of targets per sequence (its own length: a decoder's targets)
            return
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        ii = ignore_index_of(args, kwargs)
        tgt = target.detach().reshape(n, m // n)
        if _per_element(args, kwargs):
            # ``reduction="none"``: the caller weighs each target's loss afterwards (a loss mask multiplied in):
            # a target is counted when its loss reaches the gradient, read from the logits' gradient on backward
            if not isinstance(inp, torch.Tensor) or not inp.requires_grad or inp.dim() < 2 \
                    or inp.shape[:1] + inp.shape[2:] != target.shape:
                return
            inp.register_hook(self._weighed_hook(name, loc, ii, inp.shape[1], ids, tgt))
            return
        classes = inp.shape[1] if isinstance(inp, torch.Tensor) and inp.dim() >= 2 else 0
        self.s.defer(self._measure(classes, ids, tgt, tgt != ii, ii), self._judge(name, loc, ii))

    def _weighed_hook(self, name: str, loc: str, ii: int, classes: int, ids: torch.Tensor, tgt: torch.Tensor):
        """A gradient hook on a per-element loss's logits (``classes`` wide): the targets whose loss reached the
        gradient are the counted ones (nonzero gradient over the classes), measured on the device and read at
        the next flush."""

        def hook(g: torch.Tensor) -> None:
            try:
                weighed = (g.detach() != 0).any(1).reshape(tgt.shape) & (tgt != ii)
                self.s.defer(self._measure(classes, ids, tgt, weighed, ii), self._judge(name, loc, ii))
            except Exception as exc:  # never break the user's backward
                self.s.check_failed(self, exc)

        return hook

    def _measure(self, classes: int, ids: torch.Tensor, tgt: torch.Tensor, counts: torch.Tensor,
                 ii: int) -> torch.Tensor:
        """Device values ``(padding targets counted, targets counted, padding id, input padding id, kind)``:
        ``counts`` (like ``tgt``) is True where the loss counts the target; ``classes``: the loss's classes (0:
        unknown)."""
        n, t = ids.shape
        w = tgt.shape[1]
        pad_t, id_t = padding(tgt)
        pad_x, id_x = padding(ids)
        same = pad_x.any() & pad_t.any() & (id_t == id_x) & (id_t != ii)
        trained = pad_t & counts
        extra = (trained.sum(1) - 1).clamp(min=0).sum() * same
        fill = id_t
        if w in (t, t - 1):
            # the targets where the inputs are padding (label i of targets shifted by one is token i + 1's):
            # one value written there by the collate function, not the ignore index, is trained on too
            at = pad_x[:, t - w:]
            low = tgt.masked_fill(~at, torch.iinfo(tgt.dtype).max).amin()
            high = tgt.masked_fill(~at, torch.iinfo(tgt.dtype).min).amax()
            filled = at.any() & (low == high) & (low != ii) & ~same
            extra = torch.where(filled, ((at & counts).sum(1) - 1).clamp(min=0).sum(), extra)
            fill = torch.where(filled, low, fill)
            # inputs corrupted where the loss has targets (masked language modelling, denoising): the padding
            # is proven on the sequence the targets restore -- the target where one is counted, the input id
            # elsewhere -- and a counted target inside it that is that padding id is padding made a target
            restored = torch.where(tgt != ii, tgt, ids[:, t - w:])
            pad_r, id_r = padding(restored)
            edge = pad_r & ~(_shift(pad_r, 1) & _shift(pad_r, -1))  # a run's first (or, left, last) position
            inside = pad_r & ~edge & counts & (tgt == id_r)
            shown = (pad_r & (ids[:, t - w:] == id_r)).sum() * 2 >= pad_r.sum()  # the inputs mostly padding there
            vocab = ids.max() < classes  # the loss predicts over the ids' own vocabulary (tokens, not tags)
            corrupt = pad_r.any() & (id_r != ii) & shown & vocab & ~same & ~filled
            extra = torch.where(corrupt, inside.sum(), extra)
            fill = torch.where(corrupt, id_r, fill)
            id_x = torch.where(corrupt, id_r, id_x)
            kind = corrupt.long()
        else:
            kind = torch.zeros((), dtype=torch.long, device=tgt.device)
        counted = counts.sum()
        return torch.stack((extra, counted, fill, id_x, kind)).float()

    def _judge(self, name: str, loc: str, ii: int):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            extra, counted, pad_id, input_pad, kind = vals
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
            if kind:
                self._report_corrupted(name, loc, ii, sums, share, pad_id)
                return
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

    def _report_corrupted(self, name: str, loc: str, ii: int, sums: list[float], share: float, pad_id: float) -> None:
        self.s.report(
            "loss-over-padding",
            f"F.{name} at {loc} trains on the padding: {int(sums[1])} of the {int(sums[2])} targets it counted on "
            f"checked steps ({share:.0f}%) are the padding id {int(pad_id)}, inside the padded end of their "
            f"sequence, at positions whose inputs were masked or replaced (the sequence the targets restore is "
            f"padded with {int(pad_id)} there), and ignore_index={ii} does not exclude them. "
            "The masking or noise chose padding positions: the model is taught to predict padding inside padding, "
            "an easy, meaningless target that takes a share of the masking budget and of the loss from the real "
            "tokens, and a masked-token accuracy over these targets reads better than the model is.",
            fix=(f"exclude the padding from the positions the collate function may mask or corrupt, as the special "
                 f"tokens are (probability_matrix.masked_fill_(input_ids == {int(pad_id)}, 0.0) before sampling "
                 f"the mask), or set the labels there to {ii} (labels[input_ids == {int(pad_id)}] = {ii}, on the "
                 "ids before masking)."),
            where=f"F.{name} call at {loc}", key=loc)


def _per_element(args: tuple, kwargs: dict) -> bool:
    """Whether a ``cross_entropy``/``nll_loss`` call returns one loss per target (``reduction="none"``, or the
    deprecated ``reduce=False``): signature ``(input, target, weight, size_average, ignore_index, reduce,
    reduction, ...)``."""
    reduction = kwargs.get("reduction", args[6] if len(args) > 6 else "mean")
    reduce = kwargs.get("reduce", args[5] if len(args) > 5 else None)
    return reduction == "none" or reduce is False


def _shift(mask: torch.Tensor, by: int) -> torch.Tensor:
    """``mask`` moved ``by`` positions along its rows, padded with True (the neighbour outside a row)."""
    edge = torch.ones_like(mask[:, :1])
    return torch.cat((edge, mask[:, :-1]), 1) if by > 0 else torch.cat((mask[:, 1:], edge), 1)


def _filled(pad_id: float, input_pad: float) -> str:
    if pad_id == input_pad:
        return (f"the padding id {int(pad_id)} at the padded end of their sequence (the same padding as the "
                "model's input ids)")
    return (f"the value {int(pad_id)} written wherever the model's input ids are padding (pad id {int(input_pad)}): "
            "the padding of the targets is a value the loss counts")
