"""The seeded epoch order, split across ranks by global batch.

The order of an epoch is the single-process one (a pure function of seed and epoch, see
:class:`overt.engine.data.EpochSampler`).  It is cut into *global batches* of
``batch_size x world_size`` samples; rank ``r`` takes the ``r``-th slice of each, so
global batch ``k`` of a run on ``W`` ranks holds exactly the samples of batch ``k`` of a
single-process run with ``batch_size x W``: same data, same update.

Every sample is used exactly once per epoch, on exactly one rank, and every rank runs the
same number of batches (DDP and FSDP need the same number of collectives on every rank):

- the last global batch holds ``t < batch_size x W`` samples; they are split as evenly as
  possible (ranks get ``ceil`` or ``floor`` of ``t / W``);
- when ``t < W`` some rank would get none: the tail is then merged into the previous global
  batch (its ranks get ``batch_size`` or ``batch_size + 1`` samples);
- a data set with fewer samples than ranks is an error.

Nothing is padded or dropped, so the engine weights each rank's micro-batch by its share of
the global window (:func:`window_plan`) and the averaged gradient is the gradient of the
global mean loss, also for the uneven tail.
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch.utils.data import Sampler

from overt.engine.accumulation import WindowPlan
from overt.engine.data import EpochSampler
from overt.errors import ConfigError


def split_sizes(total: int, world: int) -> list[int]:
    """``total`` samples over ``world`` ranks as evenly as possible, the larger shares first."""
    base, extra = divmod(total, world)
    return [base + (1 if r < extra else 0) for r in range(world)]


def global_layout(n: int, batch_size: int, world: int) -> list[list[int]]:
    """For each global batch, the number of samples of each rank (``layout[k][r]``)."""
    if n < world:
        raise ConfigError(f"the data set has {n} samples but the run has {world} ranks",
                          why="every rank must run the same number of batches, so each needs at least one sample",
                          fix="use fewer processes (nproc) or a larger data set")
    per_global = batch_size * world
    full, tail = divmod(n, per_global)
    layout = [[batch_size] * world for _ in range(full)]
    if tail >= world or (tail and not full):
        layout.append(split_sizes(tail, world))
    elif tail:  # fewer than one sample per rank: merge into the previous global batch
        layout[-1] = split_sizes(per_global + tail, world)
    return layout


class ShardedBatchSampler(Sampler[list[int]]):
    """Batches of this rank's share of the ``(seed, epoch)`` order; resumable.

    ``set_epoch(e)`` selects the epoch's order; ``skip(consumed)`` starts after this rank's
    first ``consumed`` samples (only whole batches are ever consumed at a checkpoint)."""

    def __init__(self, n: int, *, batch_size: int, rank: int, world_size: int, shuffle: bool = True, seed: int = 0):
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is outside 0..{world_size - 1}")
        self.n, self.batch_size, self.rank, self.world_size = n, batch_size, rank, world_size
        self.shuffle, self.seed = shuffle, seed
        self.epoch = 0
        self.start_batch = 0
        self.layout = global_layout(n, batch_size, world_size)
        self._order = EpochSampler(n, shuffle=shuffle, seed=seed)  # the single-process order, reused

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.start_batch = epoch, 0

    def skip(self, consumed: int) -> None:
        """Start after this rank's first ``consumed`` samples (a whole number of batches)."""
        done, k = 0, 0
        while k < len(self.layout) and done < consumed:
            done += self.layout[k][self.rank]
            k += 1
        if done != consumed:
            raise ConfigError(f"cannot resume {consumed} samples into an epoch of rank {self.rank}: "
                              "that is not a batch boundary of this run's layout",
                              why="the saved position was taken with another batch_size or number of processes",
                              fix="resume with the saved batch_size and nproc, or from an epoch-boundary checkpoint")
        self.start_batch = k

    def order(self) -> torch.Tensor:
        """The epoch's global order: exactly the single-process :class:`EpochSampler` order."""
        self._order.set_epoch(self.epoch)
        return self._order.order()

    def batches(self) -> list[list[int]]:
        """Every batch of this rank in the epoch (before skipping)."""
        order = self.order().tolist()
        out, pos = [], 0
        for sizes in self.layout:
            start = pos + sum(sizes[:self.rank])
            out.append(order[start:start + sizes[self.rank]])
            pos += sum(sizes)
        return out

    def sizes(self) -> list[int]:
        """Samples in each of this rank's batches of a full epoch."""
        return [sizes[self.rank] for sizes in self.layout]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches()[self.start_batch:])

    def __len__(self) -> int:
        return len(self.layout) - self.start_batch

    def window_plan(self, accumulate: int) -> WindowPlan:
        """Loss weights that make the ranks' averaged gradient the global window's mean gradient."""
        return window_plan(self.layout, self.rank, accumulate)


def window_plan(layout: list[list[int]], rank: int, accumulate: int) -> WindowPlan:
    """Micro-batch ``i`` of rank ``r`` gets weight ``n_ri x W / N_window`` (``N_window``: the samples
    of every rank in the window), so DDP's mean over ``W`` ranks of the summed weighted losses is
    the mean loss over the whole global window, even when the ranks' shares differ."""
    world = len(layout[0]) if layout else 1
    weights: list[float] = []
    closes: list[bool] = []
    for start in range(0, len(layout), accumulate):
        window = layout[start:start + accumulate]
        total = float(sum(sum(sizes) for sizes in window))
        weights += [sizes[rank] * world / total for sizes in window]
        closes += [False] * (len(window) - 1) + [True]
    return WindowPlan(tuple(weights), tuple(closes))


def sharded_loader(dataset, *, batch_size: int, shuffle: bool, seed: int, rank: int, world_size: int,
                   num_workers: int = 0, pin_memory: bool = False, collate_fn=None):
    """A DataLoader over this rank's share of ``dataset`` (see :class:`ShardedBatchSampler`)."""
    from torch.utils.data import DataLoader

    from overt.engine.seeding import seed_worker

    sampler = ShardedBatchSampler(len(dataset), batch_size=batch_size, rank=rank, world_size=world_size,
                                  shuffle=shuffle, seed=seed)
    return DataLoader(dataset, batch_sampler=sampler, num_workers=num_workers, pin_memory=pin_memory,
                      collate_fn=collate_fn, worker_init_fn=seed_worker if num_workers else None,
                      generator=torch.Generator().manual_seed(seed))
