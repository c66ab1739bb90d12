"""A few elements of each weight tensor, for comparing weights across steps on the device.

Checks that ask whether weights moved (a frozen model that stays fixed, an average that follows its
model) compare the same elements at two moments: up to ``PER_TENSOR`` values spread evenly over each
tensor, in float64, taken with one slicing op per tensor (a copy, so later in-place updates do not
change it).  ``sums`` adds each whole tensor's float64 sum, which moves when any element moves.
"""

from __future__ import annotations

import torch

PER_TENSOR = 32


def weight_sample(params: list[torch.Tensor], sums: bool = False) -> torch.Tensor:
    """One float64 vector on the first tensor's device: ``PER_TENSOR`` strided values of each tensor (and
    its sum with ``sums``)."""
    parts = []
    device = params[0].device if params else None
    for p in params:
        flat = p.detach().reshape(-1)
        n = flat.numel()
        if n > PER_TENSOR:
            stride = n // PER_TENSOR
            flat = flat[:PER_TENSOR * stride:stride]
        parts.append(flat.double().to(device))  # one device: a model split over several, or an average kept on the CPU
        if sums:
            parts.append(p.detach().sum(dtype=torch.float64).reshape(1).to(device))
    return torch.cat(parts)
