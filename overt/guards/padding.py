"""Which positions of a batch of token sequences are padding, proven from the ids alone (device work,
nothing read): used by the checks on attention masks and on losses over padding."""

from __future__ import annotations

import torch


def token_ids(args: tuple) -> torch.Tensor | None:
    """A forward's first argument when it is a batch of token id sequences: a 2-D integer tensor
    ``(N, T)`` with ``T >= 4`` (detached), else None."""
    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if x is None or x.dim() != 2 or x.is_floating_point() or x.dtype == torch.bool or x.shape[1] < 4:
        return None
    return x.detach()


def padding(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask, pad_id)`` for 2-D ids ``(N, T)``: per position, whether it holds padding -- the id most
    rows end with (right padding) or start with (left padding), when every occurrence of it lies in a
    contiguous run at that end and at least half the rows hold such a run -- and that id (a device
    scalar).  The mask is all False when neither end shows one (packed text, where a common token also
    occurs inside the rows)."""
    best = torch.zeros_like(ids, dtype=torch.bool)
    best_id = ids[:1, -1].reshape(())
    for end in (-1, 0):
        pad = ids[:, end].mode().values
        is_pad = ids == pad
        run = is_pad.flip(1).cummin(1).values.flip(1) if end == -1 else is_pad.cummin(1).values
        ok = (is_pad == run).all() & (run[:, end].sum() * 2 >= len(ids)) & ~best.any()
        best = torch.where(ok, run, best)
        best_id = torch.where(ok, pad, best_id)
    return best, best_id
