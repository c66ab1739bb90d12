"""Data order that derives from (seed, epoch) alone, and loaders built on it.

:class:`EpochSampler` makes the shuffle order a pure function of the run seed
and the epoch, so a resumed run sees the same order; ``skip(n)`` starts the
epoch after the first ``n`` indices without loading them.
"""

from __future__ import annotations

import atexit
import math
import signal
import threading
import weakref
from typing import Any, Callable, Iterator, NamedTuple

import torch
from torch.utils.data import DataLoader, Sampler
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from overt.engine.seeding import epoch_seed, seed_worker


def is_ready_loader(data: Any) -> bool:
    """Whether ``data`` is a ready loader (a DataLoader, or any iterable of batches without
    ``__getitem__``/``__len__``), used as given, rather than a Dataset the engine builds a loader over."""
    return isinstance(data, DataLoader) or not hasattr(data, "__getitem__") or not hasattr(data, "__len__")


class EpochIndex(NamedTuple):
    """A sample index with the epoch it is drawn in: what an :class:`EpochSampler` with
    ``tag_epoch`` yields, so a dataset in a (persistent) loader worker knows the epoch too
    (see :class:`overt.engine.augment.Augmented`)."""

    epoch: int
    index: int


class EpochSampler(Sampler[int]):
    """Indices ``0..n-1``, shuffled by ``(seed, epoch)`` when ``shuffle``; resumable.
    With ``tag_epoch`` each index comes as an :class:`EpochIndex` ``(epoch, index)``."""

    def __init__(self, n: int, *, shuffle: bool = True, seed: int = 0, tag_epoch: bool = False):
        self.n, self.shuffle, self.seed, self.tag_epoch = n, shuffle, seed, tag_epoch
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's order and start from its beginning."""
        self.epoch, self.start = epoch, 0

    def skip(self, consumed: int) -> None:
        """Start this epoch after the first ``consumed`` indices (for resuming mid-epoch)."""
        self.start = consumed

    def order(self) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.n)
        g = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        return torch.randperm(self.n, generator=g)

    def __iter__(self) -> Iterator[Any]:
        indices = self.order()[self.start:].tolist()
        if self.tag_epoch:
            return iter([EpochIndex(self.epoch, i) for i in indices])
        return iter(indices)

    def __len__(self) -> int:
        return self.n - self.start


#: signals that mean "save and stop" to a training process; loader workers never act on them
PREEMPTION_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2})


class WorkerSafeLoader(DataLoader):
    """A DataLoader whose worker processes are started with the preemption signals blocked.

    Schedulers (SLURM, Kubernetes, systemd) and Ctrl-C signal every process of the job, workers
    included; a worker killed by SIGTERM takes the run down with "DataLoader worker is killed by
    signal" before the main process can save.  Workers are forked with these signals blocked
    (the mask is inherited, there is no window in which they could act on one) and leave the
    decision to the main process, which finishes the step, saves and stops them itself.  The
    signals are blocked in the main thread only while the workers are started; one that arrives
    meanwhile is delivered right after."""

    def _get_iterator(self) -> Any:
        if self.num_workers == 0 or threading.current_thread() is not threading.main_thread():
            return super()._get_iterator()
        self.check_worker_number_rationality()
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, PREEMPTION_SIGNALS)
        try:
            iterator = _WorkerSafeIterator(self)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        _LIVE_WORKERS.add(iterator)
        return iterator


class _WorkerSafeIterator(_MultiProcessingDataLoaderIter):
    """PyTorch's worker iterator, whose shutdown also ends workers that ignored it.

    PyTorch stops workers by queueing ``None`` to each and, should one still run, by SIGTERM --
    which these workers block.  The ``None`` is lost when the iterator is collected as part of a
    reference cycle (a discarded Trainer holding persistent workers): the garbage collector has
    then already closed the queues' feeder threads.  Such a worker would wait forever, and
    multiprocessing's exit handler with it; it is killed instead (SIGKILL cannot be blocked)."""

    def _shutdown_workers(self) -> None:
        try:
            super()._shutdown_workers()
        finally:
            for worker in getattr(self, "_workers", ()):
                if worker.is_alive():
                    worker.kill()
                    worker.join(timeout=5)


# Workers that ignore SIGTERM also ignore the SIGTERM with which multiprocessing ends daemon
# processes at interpreter exit: its exit handler would then wait for them forever (persistent
# workers of a loader still referenced at exit, an epoch abandoned by an exception).  So the
# loaders' own iterators stop their workers first, the way an iterator's end does (atexit runs
# this before multiprocessing's handler, which was registered earlier, when torch imported it).
_LIVE_WORKERS: weakref.WeakSet[Any] = weakref.WeakSet()


@atexit.register
def _stop_workers_at_exit() -> None:
    for iterator in list(_LIVE_WORKERS):
        iterator._shutdown_workers()


def build_loader(
    dataset: Any,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int,
    num_workers: int = 0,
    pin_memory: bool = False,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    drop_last: bool = False,
    persistent_workers: bool = False,
    prefetch_factor: int | None = None,
    tag_epoch: bool = False,
) -> DataLoader:
    """A DataLoader over ``dataset`` with an :class:`EpochSampler` and seeded workers.
    ``persistent_workers``/``prefetch_factor`` apply only with workers (``num_workers > 0``);
    ``tag_epoch``: the sampler yields :class:`EpochIndex` pairs (for an ``Augmented`` dataset)."""
    generator = torch.Generator().manual_seed(seed)
    workers: dict[str, Any] = {}
    if num_workers:
        workers = {"worker_init_fn": seed_worker, "persistent_workers": persistent_workers}
        if prefetch_factor is not None:
            workers["prefetch_factor"] = prefetch_factor
    return WorkerSafeLoader(
        dataset,
        batch_size=batch_size,
        sampler=EpochSampler(len(dataset), shuffle=shuffle, seed=seed, tag_epoch=tag_epoch),
        num_workers=num_workers,
        pin_memory=pin_memory,
        collate_fn=collate_fn,
        drop_last=drop_last,
        generator=generator,
        **workers,
    )


def set_loader_epoch(loader: Any, epoch: int, seed: int) -> None:
    """Tell the loader's sampler the epoch (ours or DistributedSampler) and reseed
    its worker generator, so epoch ``e`` loads the same way in a fresh process."""
    sampler = order_sampler(loader)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    generator = getattr(loader, "generator", None)
    if isinstance(generator, torch.Generator):
        generator.manual_seed(epoch_seed(seed, epoch) ^ 0x5EED)


def order_sampler(loader: Any) -> Any:
    """What decides the loader's order: its batch sampler when that is epoch-aware (the sharded
    one of a multi-process run), else its sampler."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if hasattr(batch_sampler, "set_epoch"):
        return batch_sampler
    return getattr(loader, "sampler", None)


def batch_sizes(loader: Any) -> list[int] | None:
    """Sizes of every batch the loader yields in one full epoch, when they can be
    known in advance (a plain batch_size over a sized sampler); else ``None``."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if hasattr(batch_sampler, "sizes"):  # the sharded sampler knows this rank's batches
        return batch_sampler.sizes()
    bs = getattr(loader, "batch_size", None)
    sampler = getattr(loader, "sampler", None)
    if bs is None or sampler is None:
        return None
    try:
        n = sampler.n if isinstance(sampler, EpochSampler) else len(sampler)
    except TypeError:
        return None
    full, rest = divmod(n, bs)
    if getattr(loader, "drop_last", False) or rest == 0:
        return [bs] * full
    return [bs] * full + [rest]


def window_plan(loader: Any, accumulate: int) -> Any:
    """Each micro-batch's loss weight: its share of the window's samples (over every process
    when the loader is sharded, see :func:`overt.distributed.sharding.window_plan`)."""
    from overt.engine.accumulation import WindowPlan

    batch_sampler = getattr(loader, "batch_sampler", None)
    if hasattr(batch_sampler, "window_plan"):
        return batch_sampler.window_plan(accumulate)
    sizes = batch_sizes(loader)
    return WindowPlan.build(sizes, accumulate) if sizes is not None else None


def num_batches(loader: Any) -> int | None:
    """Batches in one full epoch, or ``None`` for unsized loaders."""
    sizes = batch_sizes(loader)
    if sizes is not None:
        return len(sizes)
    try:
        return len(loader)
    except TypeError:
        return None


def check_not_empty(loader: Any, role: str) -> None:
    """Refuse a training or validation loader that yields no batch in an epoch."""
    if loader is None or num_batches(loader) != 0:
        return
    from overt.errors import OvertError

    if role == "training":
        raise OvertError("the training data is empty: an epoch has no batch",
                         why="the run would 'complete' with 0 steps and save an untrained model",
                         fix="check the data path and any filtering or split of the training set "
                             "(with drop_last=True, a set smaller than one batch is empty too)")
    raise OvertError(f"the {role} data is empty: it has no batch",
                     why="validation would be skipped silently and no best model could be chosen",
                     fix="check the validation split (e.g. val_fraction), or pass no validation data at all "
                         "(val_data=None) to train without validation")


def steps_per_epoch(loader: Any, accumulate: int) -> int | None:
    n = num_batches(loader)
    return None if n is None else math.ceil(n / accumulate)
