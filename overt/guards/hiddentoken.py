"""An evaluation that hides a token every training input showed (slug ``train-serve-skew``, widened: the
evaluation's attention mask, not only its features).

Premise (one sentence): a token that stands at the same position of every training sequence (a start or class
token) and that every training row's attention mask shows (value 1) is shown at that position in evaluation too,
when the evaluation places that same token there; an evaluation whose mask hides it (value 0) in every row runs the
model on inputs it never trained on.

Observed: the model's positional arguments, on checked training forwards and on evaluation forwards (eval mode or
``no_grad``): a ``(batch, positions)`` integer tensor (token ids) followed by a tensor of the same shape whose
values are all 0 or 1 (an attention mask).  Training accumulates, on the device, per position: whether every row
held one and the same token there and the mask was 1 in every row.  An evaluation batch with the same number of
positions is then compared: a position where training always showed the same token, and the evaluation places
that token in every row but masks it in every row, is reported (read with the next checked step's values, nothing
is synchronised).

Silent: padding (the padded positions held varied tokens in training, or the mask was 0 there in some training
row; left padding leaves the longest row of a batch unmasked), masks that are not 0/1, sequences of another
length than training's, models given keyword arguments only, evaluation before :data:`MIN_TRAIN` checked training
forwards, and models whose evaluation is given another token at the position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MIN_TRAIN = 3  # checked training forwards before an evaluation is compared
MIN_ROWS = 2  # rows of an evaluation batch ("every row" of one row proves nothing)
LOOKS = 3  # evaluation batches compared per model


def _ids_and_mask(args: tuple, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The first ``(batch, positions)`` integer tensor among the positional arguments and the first later tensor
    of the same shape (the candidate attention mask), else None.  ``kwargs``: the call's keywords (its tensors are
    in ``args`` too, as the positional call would pass them); one passed as labels or targets is not a mask."""
    named = {id(v) for k, v in kwargs.items() if "label" in k.lower() or "target" in k.lower()}
    tensors = [a for a in args if isinstance(a, torch.Tensor) and id(a) not in named]
    for i, ids in enumerate(tensors):
        if ids.dim() != 2 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            continue
        if ids.shape[1] < 2:
            return None
        for mask in tensors[i + 1:]:
            if mask.shape == ids.shape and mask.device == ids.device:
                return ids, mask
        return None
    return None


def _binary(mask: torch.Tensor) -> torch.Tensor:
    """Whether every value of ``mask`` is 0 or 1 (a device boolean)."""
    if mask.dtype == torch.bool:
        return torch.ones((), dtype=torch.bool, device=mask.device)
    return ((mask == 0) | (mask == 1)).all()


class HiddenTokenChecks(Check):
    """Evaluation attention masks that hide a token every training row showed at the same position."""

    name = "hiddentoken"

    def __init__(self, session: Any):
        super().__init__(session)
        # id(ModelInfo) -> [forwards, positions, token per position, shown-with-the-same-token per position, binary]
        self.train: dict[int, list[Any]] = {}
        self.looks: dict[int, int] = {}

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        pair = _ids_and_mask(args, info.kwargs)
        if pair is None:
            return
        ids, mask = (t.detach() for t in pair)
        shown = (mask != 0).all(0) & (ids == ids[0]).all(0)
        st = self.train.get(id(info))
        if st is None or st[1] != ids.shape[1] or st[2].device != ids.device:
            self.train[id(info)] = [1, ids.shape[1], ids[0].clone(), shown, _binary(mask)]
            return
        st[0] += 1
        st[3] = st[3] & shown & (ids[0] == st[2])
        st[4] = st[4] & _binary(mask)

    def on_eval_input(self, info: ModelInfo, args: tuple) -> None:
        st = self.train.get(id(info))
        if st is None or st[0] < MIN_TRAIN or self.looks.get(id(info), 0) >= LOOKS:
            return
        if self.s.reporter.has("train-serve-skew", info.name):
            return
        pair = _ids_and_mask(args, info.kwargs)
        if pair is None:
            return
        ids, mask = (t.detach() for t in pair)
        if ids.shape[1] != st[1] or ids.shape[0] < MIN_ROWS or ids.device != st[2].device:
            return
        self.looks[id(info)] = self.looks.get(id(info), 0) + 1
        hidden = st[3] & (mask == 0).all(0) & (ids == st[2]).all(0) & st[4] & _binary(mask)
        first = torch.where(hidden, torch.arange(st[1], device=ids.device), st[1]).amin()
        value = torch.stack((hidden.any().float(), first.float(), st[2][first.clamp_max(st[1] - 1)].float()))
        where = f"{info.name} forward, evaluation" + (f" at {site}" if (site := user_location(2)) else "")
        self.s.defer(value, self._judge(info, ids.shape[0], self.s.step, where))

    def _judge(self, info: ModelInfo, rows: int, step: int, where: str):
        s = self.s

        def callback(vals: list[float]) -> None:
            found, position, token = vals
            if not found or s.reporter.has("train-serve-skew", info.name):
                return
            s.report(
                "train-serve-skew",
                f"the evaluation of {info.name} hides a token its training always showed: token {int(token)} "
                f"stands at position {int(position)} of every training sequence with attention-mask value 1, and "
                f"the evaluation batch places the same token there in all {rows} rows with mask value 0. No "
                "position can attend to it, so the model is evaluated on inputs unlike any it was trained on and "
                "the metric (perplexity, accuracy) is that of another input distribution.",
                fix="build the evaluation's attention mask as in training: mask value 1 for every real token, the "
                "start token included; 0 only for padding.",
                where=where, key=f"eval:{info.name}", step=step,
            )

        return callback
