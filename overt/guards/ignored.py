"""Guard on training examples that contribute nothing to the loss (slug ``labels-all-ignored``;
issue 33, sequence models).

An invariant of training: every example of a training batch contributes to its loss.  With an
``ignore_index`` (``cross_entropy``/``nll_loss``) an example whose every target is that index adds
nothing: the loss is averaged over the others and looks normal.  Right truncation after the labels
were built (a prompt so long that the completion, the only labelled part, is cut off) does this to
the longest examples, silently.

Seen on checked steps: per example (a row of the targets; for one target per example, the
example itself) whether all its targets are ignored, and, when the model's first argument on that
step was a 2-D integer tensor of token ids of the same batch, whether the example's ids are padded
(the last two ids, or the first two, equal to the id most rows end, or start, with).  Counts are
summed on the device and read with the checked step's other values.  Reported, once per loss call
site, after at least ``MIN_EXAMPLES`` examples, when ``SHARE`` of them or more were entirely ignored
and

- the targets hold several per example (tokens) and at most ``SHORT`` of the ignored examples are
  padded (they are full-length: a masked LM's random masking leaves short examples unlabelled now
  and then, and masks them again next epoch);
- one target per example (a sample left unlabelled can be deliberate, as in semi-supervised
  training): only when the ignored examples are the full-length ones -- none of them padded while
  most kept examples are --, which is what truncation leaves.

Otherwise -- an ignored share below ``SHARE``, unlabelled samples of any length, no ids to judge the
length by -- silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of
from overt.guards.padding import token_ids

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

SHARE = 0.2  # share of the examples entirely ignored
MIN_EXAMPLES = 96  # examples seen before judging
KEPT_PADDED = 0.5  # one target per example: share of kept examples that are padded
SHORT = 0.1  # token targets: share of the entirely ignored examples that may be padded


def _padded(ids: torch.Tensor) -> torch.Tensor:
    """Per row: the row ends (or starts) with two copies of the id most rows end (start) with."""
    out = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    for a, b in ((-1, -2), (0, 1)):
        pad = ids[:, a].mode().values
        out |= (ids[:, a] == pad) & (ids[:, b] == pad)
    return out


class IgnoredLabelChecks(Check):
    name = "ignored"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.ids: torch.Tensor | None = None  # the latest checked forward's token ids
        self.sums: dict[str, list[float]] = {}  # call site -> [examples, ignored, ignored padded, kept padded]
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        self.ids = token_ids(args)

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in ("cross_entropy", "nll_loss") or target.is_floating_point() or target.dtype == torch.bool:
            return
        if not target.numel() or target.dim() > 3:
            return
        ids = self.ids
        if target.dim() < 2 and (ids is None or ids.shape[0] == 0):
            return  # one label per example and no lengths to judge by: unlabelled samples may be deliberate
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        ii = ignore_index_of(args, kwargs)
        t = target.detach()
        if t.dim() == 1 and ids is not None and len(t) != len(ids) and len(t) % len(ids) == 0 \
                and 1 < len(t) // len(ids) <= ids.shape[1]:
            t = t.reshape(len(ids), -1)  # token targets flattened for the loss: one row per sequence
        ignored = (t == ii).reshape(len(t), -1).all(1) if t.dim() >= 2 else t == ii
        per_example = t.dim() >= 2
        if ids is not None and ids.shape[0] == len(t) and ids.device == t.device:
            padded = _padded(ids)
        elif per_example:
            padded = torch.zeros_like(ignored)
        else:
            return  # one label per example and no lengths to judge by: unlabelled samples may be deliberate
        counts = torch.stack((ignored.sum(), (ignored & padded).sum(), (~ignored & padded).sum()))
        n = len(t)
        self.s.defer(counts, self._judge(name, loc, n, ii, per_example, self.s.step))

    def _judge(self, name: str, loc: str, n: int, ii: int, per_example: bool, step: int):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            sums = self.sums.setdefault(loc, [0.0, 0.0, 0.0, 0.0])
            for i, v in enumerate((n, *vals)):
                sums[i] += v
            total, ignored, ignored_padded, kept_padded = sums
            if total < MIN_EXAMPLES:
                return
            self.done.add(loc)
            if ignored < SHARE * total:
                return
            truncated = ignored_padded == 0 and kept_padded >= KEPT_PADDED * (total - ignored)
            if not per_example and not truncated:
                return
            if per_example and ignored_padded > SHORT * ignored:
                return  # mostly short (padded) examples: random masking (a masked LM) leaves some unlabelled
            self._report(name, loc, int(total), int(ignored), ii, truncated, step)

        return callback

    def _report(self, name: str, loc: str, total: int, ignored: int, ii: int, truncated: bool, step: int) -> None:
        why = (" The ignored examples are the full-length ones (none of them padded, while the kept ones are): "
               "truncation cut off the part that carried their labels." if truncated else "")
        msg = (f"{ignored} of the {total} training examples seen by F.{name} at {loc} on checked steps have "
               f"every target equal to ignore_index={ii}: they add nothing to the loss and train nothing, while the "
               f"loss, averaged over the other examples, looks normal.{why}")
        fix = ("keep the labelled part of every example: truncate from the left (keep the completion) or raise the "
               "maximum length, truncate before building the labels, or drop the examples left with no label "
               "before training.")
        self.s.report("labels-all-ignored", msg, where=f"F.{name} call at {loc}", fix=fix, key=loc, step=step)
