"""Distributed training on PyTorch's own machinery (torchrun, torch.distributed, DDP, FSDP2, DCP).

The engine is given one object for all of it, :class:`overt.engine.parallel.Parallel`; the
multi-process implementations are in :mod:`~overt.distributed.parallel` (this package imports
the engine, never the reverse).  Each module has one job:

- :mod:`~overt.distributed.parallel` -- the engine's parallel protocol for several processes
  (``Processes``, ``DDP``, ``FSDP``) and ``parallel_for(config)``, which picks one;
- which process this is: :class:`overt.torchrun.Topology` (``trainer.parallel.topology`` in a run);
- :mod:`~overt.distributed.group` -- process group lifecycle: init (gloo on CPU, nccl on CUDA),
  device from ``LOCAL_RANK``, teardown also on errors and signals;
- :mod:`~overt.distributed.launch` -- ``overt train ... nproc=N``: torchrun's elastic agent, in-process;
- :mod:`~overt.distributed.sharding` -- the seeded epoch order split across ranks, by global batch;
- :mod:`~overt.distributed.strategy` -- ``strategy=ddp`` / ``strategy=fsdp`` (FSDP2 ``fully_shard``);
- :mod:`~overt.distributed.reduce` -- global (all-ranks) sums for losses, metrics and throughput;
- :mod:`~overt.distributed.stop` -- the collective that makes every rank stop at the same step;
- :mod:`~overt.distributed.callback` -- the whole final weights of an FSDP2 model;
- :mod:`~overt.distributed.dcp` -- FSDP2 sharded checkpoints (torch.distributed.checkpoint) under
  overt's atomic commit and manifest.

See docs/distributed.md.
"""
