"""Metric functions for recipes, and sample-weighted averaging.

A metric is ``f(output, target) -> tensor``: the mean over the batch.  The
engine weights each batch's value by its number of samples, so an epoch's
metric is the mean over samples, not over batches (a small last batch does
not count as much as a full one).

Metric names written to ``metrics.jsonl`` and TensorBoard:

- ``train/loss``: mean training loss over the optimizer steps since the last logged point
- ``train/epoch_loss``: sample-weighted mean training loss of the epoch
- ``train/lr``: learning rate of the first parameter group
- ``train/grad_norm``: total gradient norm before clipping (when clipping is on)
- ``train/samples_per_sec``: training throughput since the last logged point
- ``val/loss`` and ``val/<name>``: validation loss and each recipe metric, sample-weighted
"""

from __future__ import annotations

import torch


def accuracy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Fraction of rows whose arg-max class equals the integer target."""
    return (output.argmax(dim=-1) == target).float().mean()


def mean_absolute_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference, for regression recipes."""
    return (output.float() - target.float()).abs().mean()


class WeightedMean:
    """Running sample-weighted means of several named device tensors; one host read at the end."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, values: dict[str, torch.Tensor], n: int) -> None:
        for name, value in values.items():
            weighted = value.detach().float() * n
            self.sums[name] = self.sums[name] + weighted if name in self.sums else weighted
        self.count += n

    def compute(self) -> dict[str, float]:
        if not self.count:
            return {}
        names = list(self.sums)
        values = (torch.stack([self.sums[k] for k in names]) / self.count).tolist()
        return dict(zip(names, values))
