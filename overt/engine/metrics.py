"""Metric functions for recipes, and sample-weighted averaging.

A metric is ``f(output, target) -> tensor``: the mean over the batch.  The
engine weights each batch's value by its number of samples, so an epoch's
metric is the mean over samples, not over batches (a small last batch does
not count as much as a full one).

Metric names written to ``metrics.jsonl`` and TensorBoard:

- ``train/loss``: mean training loss over the optimizer steps since the last logged point
- ``train/epoch_loss``: sample-weighted mean training loss of the epoch
- ``train/lr``: learning rate of the first parameter group
- ``train/grad_norm``: total gradient norm (before clipping, when clipping is on) of the logged step
- ``grad_norm/<layer>``: each layer's gradient norm at the logged step (with ``log_grad_norms``)
- ``train/samples_per_sec``: training throughput since the last logged point
- ``val/loss`` and ``val/<name>``: validation loss and each recipe metric, sample-weighted
"""

from __future__ import annotations

from typing import Callable

import torch


def accuracy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Fraction of rows whose arg-max class equals the integer target."""
    return (output.argmax(dim=-1) == target).float().mean()


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

    def compute(self, reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
        """The means; with ``reduce`` (a sum over processes) the sums and counts of every process
        are added first, so each sample of every process counts once."""
        names = list(self.sums)
        if reduce is not None:
            sums = torch.stack([self.sums[k].double() for k in names]) if names else torch.zeros(0, dtype=torch.float64)
            both = reduce(torch.cat([sums, torch.tensor([float(self.count)], dtype=torch.float64, device=sums.device)]))
            *totals, count = both.tolist()
            return {k: v / count for k, v in zip(names, totals)} if count else {}
        if not self.count:
            return {}
        values = (torch.stack([self.sums[k] for k in names]) / self.count).tolist()
        return dict(zip(names, values))


class RunningLoss:
    """The training loss, sample-weighted, kept on the device: no host read per step.

    ``add`` only keeps a reference to the detached loss; ``read_interval`` (one
    host read) reduces them and gives the mean since the last read; ``read_epoch``
    the mean over the epoch."""

    def __init__(self, device: torch.device, reduce: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.device = device
        self.reduce = reduce  # sums over processes (multi-process runs): the means are global
        self._losses: list[torch.Tensor] = []
        self._counts: list[int] = []
        self.interval_samples = 0
        self.last_samples = 0  # samples behind the last read (over every process)
        self.epoch_sum = 0.0
        self.epoch_samples = 0

    def add(self, loss: torch.Tensor, n: int) -> None:
        """``loss``: a detached, mean-reduced batch loss; ``n``: the batch's samples."""
        self._losses.append(loss)
        self._counts.append(n)
        self.interval_samples += n

    def read_interval(self) -> float | None:
        if not self.interval_samples:
            return None
        losses = torch.stack(self._losses).float().reshape(-1)
        samples = self.interval_samples
        if self.reduce is not None:  # one all-reduce of (loss sum, samples): global values
            counts = torch.tensor(self._counts, dtype=torch.float32, device=self.device)
            both = torch.stack([(losses * counts).sum().double(),
                                torch.tensor(float(samples), dtype=torch.float64, device=self.device)])
            total, samples = self.reduce(both).tolist()
        elif len(set(self._counts)) == 1:  # equal batches (the usual case): one reduction
            total = losses.sum().item() * self._counts[0]
        else:
            counts = torch.tensor(self._counts, dtype=torch.float32, device=self.device)
            total = (losses * counts).sum().item()
        self._losses, self._counts = [], []
        self.epoch_sum += total
        self.epoch_samples += samples
        self.last_samples = int(samples)
        mean = total / samples
        self.interval_samples = 0
        return mean

    def read_epoch(self) -> float | None:
        self.read_interval()
        mean = self.epoch_sum / self.epoch_samples if self.epoch_samples else None
        self.epoch_sum, self.epoch_samples = 0.0, 0
        return mean

    def state_dict(self) -> dict[str, object]:
        losses = (torch.stack(self._losses).float().reshape(-1) if self._losses
                  else torch.zeros(0, device=self.device))
        return {"losses": losses.clone(), "counts": list(self._counts), "interval_samples": self.interval_samples,
                "epoch_sum": self.epoch_sum, "epoch_samples": self.epoch_samples}

    def load_state_dict(self, state: dict[str, object]) -> None:
        losses = state["losses"]
        self._losses = [t.to(self.device) for t in losses]  # type: ignore[union-attr]
        self._counts = [int(c) for c in state["counts"]]  # type: ignore[union-attr]
        self.interval_samples = int(state["interval_samples"])  # type: ignore[arg-type]
        self.epoch_sum = float(state["epoch_sum"])  # type: ignore[arg-type]
        self.epoch_samples = int(state["epoch_samples"])  # type: ignore[arg-type]
