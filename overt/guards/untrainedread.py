"""Generation that reads predictions at positions the training loss never weighed (slug
``generation-reads-untrained-position``; issue 33, round twenty).

Premise (one sentence): a sequence model that generates token by token (each call one token longer than the last,
reading the prediction at its last position) is trained to make the predictions it reads: a position inside the
training sequences' length whose prediction the loss never weighed in any training row (a loss mask on the
observations where the actions were meant, a mask shifted off the first answer token) is one generation reads
from an untrained head.

Observed: on the first :data:`LOOKS` checked training forwards of a model whose first positional argument is a
``(batch, positions)`` integer tensor and whose output is ``(batch, positions, classes)`` floats, a gradient hook on
the output ORs, per position, whether the loss weighed the prediction in any row (a device tensor).  Then the
model's evaluation forwards (eval mode or ``no_grad``) are followed: two consecutive calls whose ids have the same
rows and one position more, the longer starting with the shorter (greedy or sampled decoding without a cache), read
the predictions at their last positions; reported (device values read with the next checked step's, or at the end)
when such a position lies inside the training length, training weighed no prediction there, and it is not past the
last position whose training tokens differ across rows (beyond it the batches looked at held only padding).

Silent: decoding beyond the training length (a character model sampling longer texts), decoding with a cache (one
new token per call), evaluation calls that do not grow by one position, losses over every position, and models
trained on keyword arguments only.  Not seen: training rows of varying length whose trained span starts at varying
positions (the union over rows then covers generation's positions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 3  # checked training forwards whose trained positions are recorded, per model
STEPS = 64  # decoding calls compared per model


def token_ids(args: tuple) -> torch.Tensor | None:
    """The first positional tensor when it is a ``(batch, positions)`` integer tensor (token ids)."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if x is None or x.dim() != 2 or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        return None
    return x


def seq_logits(output: Any) -> torch.Tensor | None:
    """The output tensor (or its ``logits`` attribute) when it is ``(batch, positions, vocabulary)`` floats that
    require grad."""
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        output = output[0]  # (logits, loss), as GPT-style models return
    out = output if isinstance(output, torch.Tensor) else getattr(output, "logits", None)
    if not isinstance(out, torch.Tensor) or out.dim() != 3 or not out.is_floating_point() or not out.requires_grad:
        return None
    return out


class UntrainedReadChecks(Check):
    """Token-by-token generation reading positions whose prediction training never weighed."""

    name = "untrainedread"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}
        self.hooked: dict[int, int] = {}  # id(ModelInfo) -> gradient hooks that ran
        self.trained: dict[int, torch.Tensor] = {}  # id(ModelInfo) -> (positions,) bool: weighed in some row
        self.varied: dict[int, torch.Tensor] = {}  # id(ModelInfo) -> (positions,) bool: tokens differ across rows
        self.pending: dict[int, torch.Tensor] = {}  # id(ModelInfo) -> ids of the forward under way
        self.prev: dict[int, torch.Tensor] = {}  # id(ModelInfo) -> ids of the last evaluation call
        self.steps: dict[int, int] = {}

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.looks.get(id(info), 0) < LOOKS:
            ids = token_ids(args)
            if ids is not None:
                self.pending[id(info)] = ids.detach()

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        ids = self.pending.pop(id(info), None)
        if ids is None or failed:
            return
        out = seq_logits(output)
        if out is None or out.shape[:2] != ids.shape:
            return
        key = id(info)
        self.looks[key] = self.looks.get(key, 0) + 1

        def grad_hook(g: torch.Tensor) -> None:
            try:
                weighed = (g.detach() != 0).any(-1).any(0)
                varied = (ids != ids[0]).any(0)
                old = self.trained.get(key)
                if old is not None and old.shape != weighed.shape:
                    self.trained[key] = torch.ones_like(weighed)  # training lengths vary: nothing is compared
                    self.hooked[key] = LOOKS + 1
                    return
                self.trained[key] = weighed if old is None else old | weighed
                self.varied[key] = varied if old is None else self.varied[key] | varied
                self.hooked[key] = self.hooked.get(key, 0) + 1
            except Exception as exc:  # never break the user's backward
                self.s.check_failed(self, exc)

        out.register_hook(grad_hook)

    def on_eval_input(self, info: ModelInfo, args: tuple) -> None:
        key = id(info)
        trained = self.trained.get(key)
        if trained is None or not 0 < self.hooked.get(key, 0) <= LOOKS or self.steps.get(key, 0) >= STEPS:
            return
        if self.s.reporter.has("generation-reads-untrained-position", info.name):
            return
        ids = token_ids(args)
        if ids is None:
            self.prev.pop(key, None)
            return
        prev, self.prev[key] = self.prev.get(key), ids.detach()
        if prev is None or prev.shape[0] != ids.shape[0] or prev.shape[1] + 1 != ids.shape[1] \
                or prev.device != ids.device or ids.device != trained.device or ids.shape[1] > trained.shape[0]:
            return
        self.steps[key] = self.steps.get(key, 0) + 1
        read = ids.shape[1] - 1  # this call's last position; the previous call's is read - 1
        grows = (ids[:, :-1] == prev).all()
        # positions past the last one where training tokens differ across rows hold only padding: not judged
        positions = torch.arange(trained.shape[0], device=trained.device)
        content = positions <= torch.where(self.varied[key], positions, -1).amax()
        untrained = (~trained & content)[read - 1:read + 1]
        found = grows & untrained.any()
        where = user_location(2)
        value = torch.stack((found.float(), untrained[0].float()))  # `read` is known here: no host-to-device copy
        self.s.defer(value, self._judge(info, trained.shape[0], read, self.s.step, where))

    def _judge(self, info: ModelInfo, length: int, read: int, step: int, site: str | None):
        s = self.s

        def callback(vals: list[float]) -> None:
            found, earlier = vals
            if not found or s.reporter.has("generation-reads-untrained-position", info.name):
                return
            position = read - 1 if earlier else read
            s.report(
                "generation-reads-untrained-position",
                f"{info.name} generates token by token and reads its prediction at position {position}, inside "
                f"the {length} positions of its training sequences, where the training loss weighed no "
                "prediction in any row: the tokens generated there come from a head the loss never trained. A "
                "loss mask that marks other tokens than the ones the model is asked to produce (the observations "
                "instead of the actions, the prompt instead of the answer) or that is not shifted like the targets "
                "(the answer's first token dropped) does this while the loss falls.",
                fix="weigh the loss on the predictions of the tokens the model will generate: the mask of the "
                "targets (actions, response) shifted like them -- mask[:, 1:] for logits of x[:, :-1].",
                where=f"{info.name} forward, generation" + (f" at {site}" if site else ""),
                key=f"gen:{info.name}", step=step,
            )

        return callback

    def remove_hooks(self) -> None:
        self.pending.clear()
        self.prev.clear()
