"""Gradient accumulation: which micro-batches form a window, and each one's loss weight.

With a mean-reduced loss, weighting micro-batch ``i`` by ``n_i / N_window``
(its samples over the window's real number of samples) makes the summed
gradient equal to the gradient of the mean loss over the whole window -- the
same update as one big batch, including a last partial window.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowPlan:
    """For every micro-batch of an epoch: its loss weight and whether it closes a window."""

    weights: tuple[float, ...]
    closes: tuple[bool, ...]

    @classmethod
    def build(cls, sizes: list[int], accumulate: int) -> WindowPlan:
        weights: list[float] = []
        closes: list[bool] = []
        for start in range(0, len(sizes), accumulate):
            window = sizes[start:start + accumulate]
            total = float(sum(window))
            weights += [n / total for n in window]
            closes += [False] * (len(window) - 1) + [True]
        return cls(tuple(weights), tuple(closes))

    @classmethod
    def by_count(cls, n_batches: int, accumulate: int) -> WindowPlan:
        """When batch sizes are unknown: weight by the window's number of micro-batches."""
        return cls.build([1] * n_batches, accumulate)

    def __len__(self) -> int:
        return len(self.weights)
