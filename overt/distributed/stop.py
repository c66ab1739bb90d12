"""Every rank stops at the same step: a signal on any rank becomes a decision of all ranks.

A preemption signal (SIGTERM, SIGINT, ``preempt_signal``) usually reaches one process (a
``kill`` of one worker) or all of them at slightly different times.  Stopping where the signal
arrived would leave ranks at different steps: the next collective hangs, or the checkpoint
mixes steps.  So a signal only records itself locally, and at agreed points every rank
contributes what it received to one all-reduce (MAX of the signal number): when any rank got
a signal, all of them stop after the same optimizer step, save once and exit with
``128 + signal``.

The agreement points are the engine's log points (every ``log_every`` optimizer steps, where
the engine reads the running loss anyway, so the collective adds no new host-device
synchronisation to the per-step path) and the end of every epoch.  Both are at the same
global step on every rank.  A stop therefore happens at most ``log_every`` steps after the
signal; lower ``log_every`` when steps are slow and the preemption grace period is short.
"""

from __future__ import annotations

import signal

import torch


def agree(local_signal: int | None, device: torch.device) -> signal.Signals | None:
    """The signal any rank received (the highest number, if several), or ``None``: a collective."""
    from overt.distributed.reduce import active, comm_device

    if not active():
        return signal.Signals(local_signal) if local_signal else None
    import torch.distributed as dist

    flag = torch.tensor([int(local_signal or 0)], dtype=torch.int64, device=comm_device(device))
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    agreed = int(flag.item())
    return signal.Signals(agreed) if agreed else None
