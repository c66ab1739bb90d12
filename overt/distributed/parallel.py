"""The engine's parallel protocol (:class:`overt.engine.parallel.Parallel`) for several processes.

- :class:`Processes`: torchrun's processes, each training its own replica on its share of the
  data (``strategy=none`` with ``nproc > 1``: nothing synchronises the gradients);
- :class:`DDP`: ``strategy=ddp`` (the default with ``nproc > 1``), DistributedDataParallel;
- :class:`FSDP`: ``strategy=fsdp``, FSDP2 ``fully_shard``, sharded checkpoints, whole final weights.

:func:`parallel_for` picks one from the config and the process group (or the torchrun
environment); :mod:`overt.compose` gives it to the Trainer.  This module imports the engine;
the engine never imports it.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping

import torch
from torch import nn

from overt.engine.parallel import Parallel

_NOTHING = contextlib.nullcontext()


class Processes(Parallel):
    """Several processes under torchrun: the process group, this rank's share of every data set,
    global sums and agreed stops; rank 0 writes whole checkpoints with every rank's RNG states."""

    strategy = "none"

    def __init__(self) -> None:
        super().__init__()
        from overt.torchrun import Topology

        self.topology = Topology.of_process()  # torchrun's environment; the group's own once it exists

    def device(self, spec: str) -> torch.device:
        from overt.distributed.group import init_from_env
        from overt.torchrun import Topology

        _, device, _ = init_from_env(spec)  # the process group (gloo on CPU, nccl on CUDA), cuda:LOCAL_RANK
        self.topology = Topology.of_process()
        return device

    def loader(self, data: Any, *, batch_size: int, train: bool, config: Any, pin_memory: bool,
               collate_fn: Callable[[list[Any]], Any] | None, tag_epoch: bool) -> Any:
        """This rank's share of the seeded order, by global batch (:mod:`overt.distributed.sharding`)."""
        from overt.distributed.sharding import sharded_loader

        return sharded_loader(data, batch_size=batch_size, shuffle=train, seed=config.seed, rank=self.rank,
                              world_size=self.world_size, num_workers=config.num_workers, pin_memory=pin_memory,
                              collate_fn=collate_fn)

    @property
    def sum_reduce(self) -> Callable[[torch.Tensor], torch.Tensor]:  # type: ignore[override]
        from overt.distributed.reduce import sum_across_ranks

        return sum_across_ranks

    def all_true(self, flag: bool, device: torch.device) -> bool:
        from overt.distributed.reduce import all_ranks

        return all_ranks(flag, device)

    def agree_stop(self, received: int | None, device: torch.device) -> signal.Signals | None:
        from overt.distributed.stop import agree

        return agree(received, device)

    def gather_rng(self) -> list[dict[str, Any]] | None:
        from overt.distributed.dcp import gather_rng

        return gather_rng()

    def save_checkpoint(self, checkpointer: Any, step: int, objects: dict[str, Any], *, metric: float | None,
                        meta: dict[str, Any]) -> Path | None:
        """Every rank's RNG states (a collective); rank 0 writes, the others hold the same weights."""
        from overt.run.layout import checkpoint_name

        objects = {**objects, "rank_rng": {"world_size": self.world_size, "states": self.gather_rng()}}
        if not self.is_main:  # rank 0 writes it; this rank knows where
            checkpointer.last_saved = checkpointer.directory / checkpoint_name(step)
            return None
        return checkpointer.save(step, objects, metric=metric, meta=meta)


class DDP(Processes):
    """``strategy=ddp``: the forward runs through DistributedDataParallel (gradients averaged in
    backward, skipped inside an accumulation window); ``trainer.model`` stays the user's module."""

    strategy = "ddp"

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, device: torch.device, precision: str,
             accumulate: int, config: Any) -> nn.Module:
        from overt.distributed.strategy import wrap_ddp

        self._ddp = wrap_ddp(model, device)
        return self._ddp

    def grad_sync(self, closes: bool) -> ContextManager[Any]:
        return _NOTHING if closes else self._ddp.no_sync()  # inside a window: all-reduce at its end only


class FSDP(Processes):
    """``strategy=fsdp``: FSDP2 shards the model in place (the optimizer re-pointed at the shards);
    checkpoints are every rank's shards; the final weights are gathered whole for rank 0's writer."""

    strategy = "fsdp"
    sharded_state = True

    def __init__(self, *, gather_final_weights: bool = True) -> None:
        super().__init__()
        self.gather_final_weights = gather_final_weights
        self._final: Mapping[str, torch.Tensor] | None = None

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, device: torch.device, precision: str,
             accumulate: int, config: Any) -> nn.Module:
        from overt.distributed.strategy import shard_fsdp

        self._sharded = shard_fsdp(model, optimizer, device, precision, list(config.fsdp_wrap or []))
        self._accumulate = accumulate
        return self._sharded

    def grad_sync(self, closes: bool) -> ContextManager[Any]:
        if self._accumulate > 1:  # reduce-scatter only at the window's last micro-batch
            self._sharded.set_requires_gradient_sync(closes)
        return _NOTHING

    def save_checkpoint(self, checkpointer: Any, step: int, objects: dict[str, Any], *, metric: float | None,
                        meta: dict[str, Any]) -> Path | None:
        """Every rank writes its shards (a collective); rank 0 commits the checkpoint."""
        from overt.distributed.dcp import save_sharded

        return save_sharded(checkpointer, step, objects, metric=metric, meta=meta)

    def load_sharded(self, restored: Any, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        from overt.distributed.dcp import load_sharded

        load_sharded(restored, model, optimizer)

    def finish(self, model: nn.Module) -> None:
        if self.gather_final_weights:  # a collective, once: every rank takes part
            from overt.distributed.callback import full_state_dict

            self._final = full_state_dict(model)

    def final_weights(self, model: nn.Module) -> Mapping[str, torch.Tensor] | None:
        return self._final


def parallel_for(config: Any, *, gather_final_weights: bool = True) -> Parallel:
    """The protocol for a run with ``config`` in this process: the engine's single-process default
    unless a process group exists or torchrun started several processes; then ``strategy``
    (``auto``: ddp) picks :class:`DDP`, :class:`FSDP` or :class:`Processes`.  ``gather_final_weights``:
    whether FSDP2 gathers the whole weights when training ends (needed only to write them)."""
    from overt.distributed.strategy import resolve_strategy
    from overt.torchrun import Topology

    size = Topology.of_process().world_size  # the group itself is made when the Trainer asks for its device
    strategy = resolve_strategy(config.strategy, size)
    if size == 1:
        return Parallel()
    if strategy == "fsdp":
        return FSDP(gather_final_weights=gather_final_weights)
    return DDP() if strategy == "ddp" else Processes()
