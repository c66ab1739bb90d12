"""Guard on evaluation passes that leave samples out (slug ``eval-drops-samples``; issue 33, data
pipelines: evaluation on a subset by accident).

An invariant of evaluation: a pass over the evaluation data scores every sample of it.  A
DataLoader with ``drop_last=True`` throws away the last, partial batch: ``len(dataset) %
batch_size`` samples of every evaluation pass are never scored, the metric is computed on a subset
that depends on the batch size, and results change when only the batch size changes
(thuml/Autoformer#104, yuqinie98/PatchTST#7, NVIDIA-NeMo/RL#958, areal-project/AReaL#1095,
zyang-ur/ReSC#8, ai2cm/ace#647: ``drop_last=True`` copied from the training loader).

Seen once per DataLoader pass, at its first batch, from sizes alone (no device work): the pass runs
as an evaluation (autograd off, or every watched model in eval mode), the loader's batch sampler
drops its last batch and the sampler's length is not a multiple of the batch size.  A
``DistributedSampler``'s own ``drop_last`` (ranks given equal shares) is not judged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import BatchSampler

from overt.guards.aside import as_user
from overt.guards.check import Check
from overt.guards.where import user_location


class EvalDropChecks(Check):
    name = "evaldrop"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seen: set[int] = set()  # id(dataset) of evaluation loaders judged

    def first_batch(self, it: Any) -> None:
        """The first batch of a DataLoader pass (called from the iterator's ``__next__``)."""
        s = self.s
        batches = getattr(it, "_index_sampler", None)
        if not isinstance(batches, BatchSampler) or not batches.drop_last or not s.models:
            return
        dataset = getattr(it, "_dataset", None)
        if id(dataset) in self.seen:
            return
        if torch.is_grad_enabled() and any(info.module.training for info in s.models.values()):
            return  # a training pass: dropping a ragged last batch is a choice there
        self.seen.add(id(dataset))
        try:
            n, size = as_user(len, batches.sampler), int(batches.batch_size)  # the user's __len__
        except TypeError:
            return
        dropped = n % size if size > 0 else 0
        if not dropped:
            return
        name = type(dataset).__name__
        loc = user_location(3) or ""
        s.report(
            "eval-drops-samples",
            f"the DataLoader over {name} iterated for evaluation{' at ' + loc if loc else ''} has drop_last=True: "
            f"{dropped} of its {n} samples ({dropped / n:.0%}) are left out of every evaluation pass (the last, "
            f"partial batch of {size}), so the metric is computed on {n - dropped} samples and moves when only the "
            "batch size changes.",
            fix="build evaluation loaders with drop_last=False (the default); weight per-batch means by the batch "
            "size, or sum over samples and divide by the number of samples.",
            where=f"DataLoader over {name}" + (f" at {loc}" if loc else ""), key=f"{name}:{id(dataset)}")
