"""The parallel protocol: everything the engine and its plug-ins need to know about how a run is
spread over processes, asked of one object (``trainer.parallel``).

:class:`Parallel` is the single-process default and the contract: this process is rank 0 of 1,
the forward runs through the model itself, gradients are never synchronised, sums are local,
a stop signal is this process's own, and a checkpoint is written by this process.  It imports
no ``torch.distributed``.  The multi-process implementations (``strategy=ddp``,
``strategy=fsdp``) live in :mod:`overt.distributed.parallel`, which imports the engine (never
the reverse); :mod:`overt.compose` picks one for the run.

What an implementation provides, and who asks:

==============================  ==============================================================
``rank``, ``world_size``,       which process this is (the one place that says so once a run is
``is_main``, ``strategy``       built); whatever writes or prints does it on ``is_main`` only
``device(spec)``                the training device (a multi-process run: its process group first)
``wrap(model, optimizer, ...)`` the module the forward runs through (DDP wrapper, FSDP2 shards)
``grad_sync(closes)``           the loop: ``with parallel.grad_sync(closes): micro_step(...)``
                                (gradients synchronised only at an accumulation window's end)
``loader(data, ...)``           a seeded, resumable loader over this process's share of a data set
``sum_reduce``                  sums over processes for global losses/metrics (None: local sums)
``all_true``, ``agree_stop``    collectives: a flag true everywhere; the signal any process got
``save_checkpoint``,            the checkpointer's hooks: who writes what (rank 0 the whole state,
``sharded_state``,              or every rank its shards) and how sharded state is read back
``load_sharded``
``gather_rng``                  every process's RNG states for a checkpoint (a collective)
``finish(model)``,              the whole final weights: gathered on every process when training
``final_weights(model)``        ends (the engine calls ``finish``), asked for by the writer
==============================  ==============================================================
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping

import torch
from torch import nn

from overt.torchrun import Topology

_NO_SYNC_NEEDED = contextlib.nullcontext()  # reusable: entering it costs nothing per micro-batch


class Parallel:
    """One process, the whole model here: the engine's default (see the module's table)."""

    #: the resolved strategy, as ``summary.json`` reports it
    strategy: str = "none"
    #: whether a checkpoint's model and optimizer state are written as every process's shards
    sharded_state: bool = False

    def __init__(self) -> None:
        #: which process this is (:class:`overt.torchrun.Topology`): one of one here; a multi-process
        #: strategy sets it once, when its process group exists (:meth:`device`)
        self.topology = Topology()
        self._user_ddp: nn.Module | None = None  # a model the user wrapped in DDP himself

    @property
    def rank(self) -> int:
        """This process's rank (``topology.rank``)."""
        return self.topology.rank

    @property
    def world_size(self) -> int:
        """The number of processes (``topology.world_size``)."""
        return self.topology.world_size

    @property
    def is_main(self) -> bool:
        """The process that writes files and prints (rank 0)."""
        return self.topology.is_main

    # -- building the run ----------------------------------------------------------------------

    def device(self, spec: str) -> torch.device:
        """The device this process trains on (``auto``: CUDA, then MPS, then the CPU)."""
        from overt.engine.device import pick_device

        return pick_device(spec)

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, device: torch.device, precision: str,
             accumulate: int, config: Any) -> nn.Module:
        """The module the forward runs through (``trainer.model`` stays the user's module)."""
        self._user_ddp = model if isinstance(model, nn.parallel.DistributedDataParallel) else None
        return model

    def loader(self, data: Any, *, batch_size: int, train: bool, config: Any, pin_memory: bool,
               collate_fn: Callable[[list[Any]], Any] | None, tag_epoch: bool) -> Any:
        """A seeded, resumable loader over ``data``: shuffled and with ``drop_last`` for training, in
        order and complete for validation."""
        from overt.engine.data import build_loader

        return build_loader(data, batch_size=batch_size, shuffle=train, seed=config.seed,
                            num_workers=config.num_workers, pin_memory=pin_memory, collate_fn=collate_fn,
                            drop_last=train and config.drop_last, persistent_workers=config.persistent_workers,
                            prefetch_factor=config.prefetch_factor, tag_epoch=tag_epoch)

    # -- the loop ------------------------------------------------------------------------------

    def grad_sync(self, closes: bool) -> ContextManager[Any]:
        """The context of one micro-batch's forward and backward: ``closes`` is whether it ends an
        accumulation window (where gradients must be synchronised).  One process: nothing to do,
        except for a model the user wrapped in DDP, whose all-reduce is skipped inside a window."""
        if not closes and self._user_ddp is not None:
            return self._user_ddp.no_sync()
        return _NO_SYNC_NEEDED

    #: sums over every process (float64); None: the sums are this process's own
    sum_reduce: Callable[[torch.Tensor], torch.Tensor] | None = None

    def all_true(self, flag: bool, device: torch.device) -> bool:
        """Whether ``flag`` holds on every process (a collective when there are several)."""
        return flag

    def agree_stop(self, received: int | None, device: torch.device) -> signal.Signals | None:
        """The stop signal any process received (a collective when there are several)."""
        return signal.Signals(received) if received else None

    # -- checkpoints ---------------------------------------------------------------------------

    def gather_rng(self) -> list[dict[str, Any]] | None:
        """Every process's RNG states, on the main process (None elsewhere; a collective).  One
        process: None, its RNG states are the checkpoint's own."""
        return None

    def save_checkpoint(self, checkpointer: Any, step: int, objects: dict[str, Any], *, metric: float | None,
                        meta: dict[str, Any]) -> Path | None:
        """Write a checkpoint of ``objects`` with ``checkpointer`` (an :class:`overt.Checkpointer`);
        returns its path on a process that wrote it, None on one that did not."""
        return checkpointer.save(step, objects, metric=metric, meta=meta)

    def load_sharded(self, restored: Any, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Read a sharded checkpoint's model and optimizer (only strategies with ``sharded_state``)."""
        from overt.errors import ConfigError

        raise ConfigError(f"{restored.path} holds sharded state; this run has one process",
                          fix="resume it with the strategy and processes it was saved with (strategy=fsdp nproc=N)")

    # -- the end -------------------------------------------------------------------------------

    def finish(self, model: nn.Module) -> None:
        """Training ended: gather what the writers need from every process (a collective under FSDP2)."""

    def final_weights(self, model: nn.Module) -> Mapping[str, torch.Tensor] | None:
        """The whole model's weights for ``model.safetensors`` on the main process, or None when
        ``model`` itself holds them whole (written as it is)."""
        return None
