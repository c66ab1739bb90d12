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


class RunningLoss:
    """The training loss, sample-weighted, kept on the device: no host read per step.

    ``add`` only keeps a reference to the detached loss; ``read_interval`` (one
    host read) reduces them and gives the mean since the last read; ``read_epoch``
    the mean over the epoch."""

    def __init__(self, device: torch.device):
        self.device = device
        self._losses: list[torch.Tensor] = []
        self._counts: list[int] = []
        self.interval_samples = 0
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
        if len(set(self._counts)) == 1:  # equal batches (the usual case): one reduction
            total = losses.sum().item() * self._counts[0]
        else:
            counts = torch.tensor(self._counts, dtype=torch.float32, device=self.device)
            total = (losses * counts).sum().item()
        self._losses, self._counts = [], []
        self.epoch_sum += total
        self.epoch_samples += self.interval_samples
        mean = total / self.interval_samples
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
