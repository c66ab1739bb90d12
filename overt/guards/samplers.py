"""Guards on how the data is drawn and split across ranks (slugs ``unsharded-sampler``, ``unset-epoch``,
``sampler-weights-short``).

Both look once per DataLoader pass (when its first batch is taken), never per batch:

- ``unset-epoch``: a shuffling sampler with ``set_epoch`` (``DistributedSampler``, or any
  sampler with ``shuffle`` and ``epoch``) starts a new pass with the same ``epoch`` as its
  previous pass: ``set_epoch`` was not called, so every epoch repeats the first epoch's order.
- ``unsharded-sampler``: with more than one process, the loader that feeds the optimizer
  steps (the pass in progress at a checked step) draws from a plain ``RandomSampler`` or
  ``SequentialSampler`` over the whole data set: every rank trains on every sample, so an
  epoch is ``world_size`` epochs of duplicated work and DDP averages identical gradients.
  A data set that is already split per rank (a ``Subset``, an ``IterableDataset``), or batches
  split per rank by the batch sampler (Accelerate's ``BatchSamplerShard``, so the Hugging Face
  ``Trainer``'s loaders), is not flagged.
- ``sampler-weights-short``: a ``WeightedRandomSampler`` with fewer weights than its loader's data set
  has samples: it draws indices below ``len(weights)`` only (one weight per class given where one per
  sample was meant), so the samples past them are never drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset, RandomSampler, SequentialSampler, Subset, WeightedRandomSampler

from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo


def _sampler_of(it: Any) -> Any:
    index_sampler = getattr(it, "_index_sampler", None)
    return getattr(index_sampler, "sampler", index_sampler)


class SamplerChecks(Check):
    """``pass_started`` is called by :mod:`overt.guards.patches` when a DataLoader pass begins."""

    name = "samplers"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.epochs: dict[int, Any] = {}  # id(sampler) -> its epoch at the start of the previous pass
        self.current: tuple[str, str] | None = None  # (sampler description, dataset) of an unsharded pass

    def pass_started(self, it: Any) -> None:
        sampler = _sampler_of(it)
        if sampler is None:
            return
        self._epoch(sampler)
        self.current = self._unsharded(it, sampler)
        if isinstance(sampler, WeightedRandomSampler):
            self._weights(it, sampler)

    def _weights(self, it: Any, sampler: WeightedRandomSampler) -> None:
        """Read from the sizes alone (host metadata): the weights' length against the data set's."""
        dataset = getattr(it, "_dataset", None)
        if dataset is None or isinstance(dataset, IterableDataset):
            return
        try:
            n, w = len(dataset), len(sampler.weights)
        except TypeError:
            return
        if w >= n or w == 0:
            return
        from overt.guards.where import user_location

        loop = user_location(2)
        self.s.report(
            "sampler-weights-short",
            f"the WeightedRandomSampler of this DataLoader holds {w} weights for a {type(dataset).__name__} of "
            f"{n} samples: it draws indices 0..{w - 1} only, so {n - w} of the {n} samples ({(n - w) / n:.0%}) "
            f"are never drawn and every epoch of {sampler.num_samples} draws repeats the first {w}"
            + (" (one weight per class given where one per sample is meant)" if w <= 1000 else "") + ".",
            fix="give the sampler one weight per sample, the weight of its class: "
            "WeightedRandomSampler(class_weights[labels], num_samples=len(dataset))",
            where=self._where("WeightedRandomSampler" + (f" iterated at {loop}" if loop else "")),
            key=str(id(sampler)),
        )

    def _epoch(self, sampler: Any) -> None:
        if not (getattr(sampler, "shuffle", False) and hasattr(sampler, "set_epoch") and hasattr(sampler, "epoch")):
            return
        key, epoch = id(sampler), sampler.epoch
        previous = self.epochs.get(key, _UNSEEN)
        self.epochs[key] = epoch
        if previous is _UNSEEN or previous != epoch:
            return
        name = type(sampler).__name__
        self.s.report(
            "unset-epoch",
            f"a new pass over the data starts with {name}.epoch still {epoch}, as in the previous pass: "
            "set_epoch() is not called, so every epoch uses the same shuffled order (and with several "
            "processes, the same split of the data across ranks).",
            fix="call sampler.set_epoch(epoch) at the "
            "start of every epoch, before iterating the DataLoader.",
            where=self._where(f"{name} (epoch {epoch})"), key=str(key),
        )

    def _unsharded(self, it: Any, sampler: Any) -> tuple[str, str] | None:
        from overt.torchrun import Topology

        if Topology.of_group().world_size < 2 or not isinstance(sampler, (RandomSampler, SequentialSampler)):
            return None
        if getattr(getattr(it, "_index_sampler", None), "num_processes", 1) > 1:
            return None  # a batch sampler that splits the batches across ranks (Accelerate's BatchSamplerShard)
        dataset = getattr(it, "_dataset", None)
        if dataset is None or isinstance(dataset, (IterableDataset, Subset)):
            return None
        try:
            if len(sampler) != len(dataset):
                return None
        except TypeError:
            return None
        return type(sampler).__name__, f"{type(dataset).__name__} of {len(dataset)} samples"

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        """At a checked optimizer step: the pass in progress feeds training."""
        if self.current is None:
            return
        from overt.torchrun import Topology

        sampler, dataset = self.current
        size = Topology.of_group().world_size
        self.s.report(
            "unsharded-sampler",
            f"{size} processes train, but the training DataLoader draws from a {sampler} over the whole "
            f"{dataset}: every rank sees every sample, so each epoch does the same work {size} times and the "
            "ranks' gradients average over duplicated data.",
            fix="DataLoader(dataset, batch_size=..., "
            "sampler=DistributedSampler(dataset, shuffle=True)) (no shuffle= on the DataLoader) and call "
            "sampler.set_epoch(epoch) every epoch; overt's engine shards its loaders itself.",
            where=self._where(f"DataLoader({sampler})"), key="unsharded",
        )
        self.current = None

    @staticmethod
    def _where(what: str) -> str:
        from overt.torchrun import Topology

        group = Topology.of_group()
        rank, size = group.rank, group.world_size
        return f"{what} on rank {rank}" if size > 1 else what


_UNSEEN = object()
