"""Guard on evaluation inputs that change from one pass to the next (slug ``eval-inputs-augmented``).

An invariant of evaluation: the same loader in the same order gives the same inputs every time.
A random augmentation reaching the evaluation data (a transform set on the dataset that
``random_split``'s subsets share, a training transform reused for validation) breaks it, and the
validation metric becomes noisy and biased.  For each DataLoader whose order is fixed
(a ``SequentialSampler``), the first batch of every pass that runs as an evaluation (every watched
model in eval mode, or autograd off) is kept as a few values of its first tensor (on the host:
loader output is not on an accelerator, nothing is synchronised); the next evaluation pass over the
same dataset must start with the same values.  Once per pass, never per step.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import SequentialSampler

from overt.guards.check import Check

VALUES = 256  # values of the first input tensor kept per pass


def _first_tensor(batch: Any) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, (list, tuple)) and batch:
        return _first_tensor(batch[0])
    if isinstance(batch, dict) and batch:
        return _first_tensor(next(iter(batch.values())))
    return None


class EvalDataChecks(Check):
    name = "evaldata"

    def __init__(self, session: Any):
        super().__init__(session)
        self.kept: dict[int, tuple[Any, torch.Tensor]] = {}  # id(dataset) -> (dataset, first values)

    def first_batch(self, it: Any, batch: Any) -> None:
        """The first batch of a DataLoader pass (called from the iterator's ``__next__``)."""
        s = self.s
        if s.reporter.has("eval-inputs-augmented"):
            return
        sampler = getattr(getattr(it, "_index_sampler", None), "sampler", None)
        if not isinstance(sampler, SequentialSampler):
            return
        if not s.models:
            return
        evaluating = not torch.is_grad_enabled() or all(not info.module.training for info in s.models.values())
        if not evaluating:
            return
        t = _first_tensor(batch)
        if t is None or t.device.type != "cpu" or not t.is_floating_point() or not t.numel():
            return
        values = t.detach().reshape(-1)[:VALUES].clone()
        dataset = getattr(it, "_dataset", None)
        key = id(dataset)
        prev = self.kept.get(key)
        self.kept[key] = (dataset, values)
        if prev is None or prev[0] is not dataset or prev[1].shape != values.shape:
            return
        if torch.equal(prev[1], values) or (prev[1].isnan() & values.isnan()).all():
            return
        name = type(dataset).__name__
        s.report(
            "eval-inputs-augmented",
            f"the evaluation DataLoader over {name} gave different inputs for the same samples on two passes "
            "(same order, first batch): its data is randomly transformed at evaluation time, so every "
            "validation metric is noisy and measured on augmented inputs the model is not deployed on.",
            fix="give evaluation its own deterministic transform (e.g. a separate dataset object for the "
            "validation indices: Subset(Dataset(transform=eval_transform), val.indices)); random_split's subsets "
            "share their dataset, and with it its transform.",
            where=f"DataLoader over {name}", key=name,
        )
