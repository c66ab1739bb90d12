"""Global values from per-rank partial sums: one small all-reduce, at points that read values anyway.

The engine keeps sums (loss x samples, samples, metric x samples) on each rank and reads them
at log points and at the end of validation; with more than one process those sums are first
summed over the ranks, so every logged number is the global one (the mean over all ranks'
samples), identical on every rank.
"""

from __future__ import annotations

import torch


def active() -> bool:
    from overt.torchrun import Topology

    return Topology.of_group().world_size > 1


def comm_device(device: torch.device) -> torch.device:
    """Where a tensor must live for the default group's backend (nccl: the GPU; gloo: the CPU)."""
    import torch.distributed as dist

    return device if dist.get_backend() == "nccl" else torch.device("cpu")


def sum_across_ranks(values: torch.Tensor) -> torch.Tensor:
    """``values`` summed over every rank (float64, so counts and sums stay exact); unchanged
    without a process group.  A collective: every rank must call it at the same point."""
    if not active():
        return values
    import torch.distributed as dist

    buf = values.detach().to(comm_device(values.device), torch.float64)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    return buf.to(values.device)


def all_ranks(flag: bool, device: torch.device) -> bool:
    """True when ``flag`` is true on every rank (a collective); ``flag`` without a process group."""
    if not active():
        return flag
    import torch.distributed as dist

    buf = torch.tensor([1 if flag else 0], dtype=torch.int64, device=comm_device(device))
    dist.all_reduce(buf, op=dist.ReduceOp.MIN)
    return bool(buf.item())
