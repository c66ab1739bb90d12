"""Guard on attention masks that attend to the padding (slug ``attention-mask-inverted``; issue 33).

An invariant of attention over padded sequences: the key positions an attention call ignores are
the padding, and the ones it attends to are the tokens.  Mask conventions differ -- a boolean
``attn_mask`` of ``F.scaled_dot_product_attention`` is True where attention is *allowed*, the
``key_padding_mask`` of ``nn.MultiheadAttention`` True where it is *not*, a Hugging Face
``attention_mask`` 1 on the tokens -- and a padding mask passed with the other convention sends all
the attention to the padding: the output no longer depends on the words.

Seen on checked training forwards of a watched model whose first argument is a 2-D integer tensor
of token ids ``(N, T)``: each ``F.scaled_dot_product_attention`` call made during that forward
whose mask covers ``N`` sequences of ``T`` keys, and each ``key_padding_mask`` of shape ``(N, T)``
given to ``nn.MultiheadAttention`` (and the ``nn.Transformer*`` layers built on it).  The padding is
proven from the ids: the id most rows end with (or start with), forming a contiguous run at that
end of every row that holds it.  On the device: the rows holding both padding and tokens, and among
them the rows whose attended keys (a boolean mask's True entries, an additive mask's entries above
-1e4, over every query and head) are exactly their padding positions.  Reported, once per call site,
when at least ``MIN_ROWS`` such rows were seen and ``SHARE`` of them attend exactly their padding.
Otherwise -- no ids, keys that are not the ids' positions, no padding to prove, a mask that attends
to tokens -- silent.  Outside checked forwards the wrapper costs one global read.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.padding import padding, token_ids
from overt.guards.positions import TRACING
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

MIN_ROWS = 8
SHARE = 0.9
ADDITIVE_MASKED = -1e4  # an additive mask's entries at or below this mask the key out


class AttentionMaskChecks(Check):
    name = "attnmask"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.ids: torch.Tensor | None = None  # the token ids of the checked forward in progress
        self.info: ModelInfo | None = None
        # call site -> [rows holding padding and tokens, rows attending exactly their padding]
        self.sums: dict[str, list[float]] = {}
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        ids = token_ids(args)
        if ids is not None:
            self.ids, self.info = ids, info
        elif self.info is None:
            self.ids = None

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is self.info:
            self.ids, self.info = None, None

    def on_attention(self, q: Any, k: Any, mask: Any) -> None:
        """An ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` call on a checked step."""
        ids = self.ids
        if ids is None or not isinstance(mask, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() < 3:
            return
        n, t = ids.shape
        if k.shape[-2] != t or mask.shape[-1] != t or mask.dim() != q.dim() or mask.shape[0] != n:
            return  # a mask broadcast over the batch (a causal mask alone) is no per-sequence padding mask
        attended = mask.detach() if mask.dtype == torch.bool else mask.detach() > ADDITIVE_MASKED
        self._judge_rows(attended.reshape(n, -1, t).any(1), user_location(3))

    def on_key_padding(self, key_padding_mask: Any) -> None:
        """``F.multi_head_attention_forward(..., key_padding_mask=...)`` (``nn.MultiheadAttention``: True,
        or an additive -inf, on the keys to ignore) on a checked step."""
        ids, kpm = self.ids, key_padding_mask
        if ids is None or not isinstance(kpm, torch.Tensor) or kpm.shape != ids.shape:
            return
        attended = ~kpm.detach() if kpm.dtype == torch.bool else kpm.detach() > ADDITIVE_MASKED
        self._judge_rows(attended, user_location(4))

    def _judge_rows(self, attended: torch.Tensor, where: str | None) -> None:
        ids = self.ids
        loc = where or "attention call"
        if ids is None or loc in self.done or attended.device != ids.device:
            return
        pad, _ = padding(ids)
        mixed = pad.any(1) & (~pad).any(1)
        inverted = mixed & (attended == pad).all(1)
        self.s.defer(torch.stack((mixed.sum(), inverted.sum())), self._judge(loc, self.info))

    def _judge(self, loc: str, info: ModelInfo | None):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            sums = self.sums.setdefault(loc, [0.0, 0.0])
            sums[0] += vals[0]
            sums[1] += vals[1]
            if sums[0] < MIN_ROWS:
                return
            self.done.add(loc)
            if sums[1] < SHARE * sums[0]:
                return
            model = f" of {info.name}" if info is not None else ""
            self.s.report(
                "attention-mask-inverted",
                f"the attention{model} at {loc} attends only to the padding: in {int(sums[1])} of {int(sums[0])} "
                "padded sequences the key positions its mask lets through are exactly the padding positions of the "
                "input ids, and every token is masked out. The mask was passed with the opposite convention, so the "
                "output does not depend on the words and the model learns little or nothing.",
                fix="invert the mask: a boolean attn_mask of F.scaled_dot_product_attention is True where attention "
                "is allowed (pass ~padding); key_padding_mask of nn.MultiheadAttention is True on the padding; a "
                "Hugging Face attention_mask is 1 on the tokens.",
                where=f"attention call at {loc}", key=loc)

        return callback


def _wrapper(active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                     *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():  # traced by torch.compile: PyTorch's own call, no graph break
            return orig(query, key, value, attn_mask, *args, **kwargs)
        if TRACING:  # a probe's forward (causal-mask-missing): where positions mix
            out = orig(query, key, value, attn_mask, *args, **kwargs)
            for trace in TRACING:
                trace.attention((query, key, value), out)
            return out
        if attn_mask is None or not active or not is_armed():
            return orig(query, key, value, attn_mask, *args, **kwargs)
        for s in active:
            if s.armed:
                try:
                    s.attnmask.on_attention(query, key, attn_mask)
                except Exception as exc:  # never break the user's call over a check
                    s.check_failed(s.attnmask, exc)
        return orig(query, key, value, attn_mask, *args, **kwargs)

    return scaled_dot_product_attention


def _mha_wrapper(active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def multi_head_attention_forward(*args: Any, **kwargs: Any) -> Any:
        kpm = kwargs.get("key_padding_mask")
        if torch.compiler.is_compiling() or kpm is None or not active or not is_armed():
            return orig(*args, **kwargs)
        for s in active:
            if s.armed:
                try:
                    s.attnmask.on_key_padding(kpm)
                except Exception as exc:  # never break the user's call over a check
                    s.check_failed(s.attnmask, exc)
        return orig(*args, **kwargs)

    return multi_head_attention_forward


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``F.scaled_dot_product_attention`` and ``F.multi_head_attention_forward`` (what
    ``nn.MultiheadAttention`` calls, by keyword) with ``patch(owner, name, make)``."""
    import torch.nn.functional as F

    if hasattr(F, "scaled_dot_product_attention"):
        patch(F, "scaled_dot_product_attention", functools.partial(_wrapper, active, is_armed))
    if hasattr(F, "multi_head_attention_forward"):
        patch(F, "multi_head_attention_forward", functools.partial(_mha_wrapper, active, is_armed))
