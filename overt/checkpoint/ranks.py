"""A checkpoint saved by one number of processes, continued by another (or with another batch size).

The position in an epoch is saved per rank (``samples_seen``: this rank's samples so far;
``batch_index``: micro-batches).  A checkpoint is only taken after whole global batches, so
the global position is ``samples_seen x saved world size``.  With the same world size and
batch size nothing changes.  Otherwise the position is translated into the new layout when
the global position is a whole number of the new global batches (and of accumulation
windows); at an epoch boundary that always holds.  What stays exact with another world size
(FSDP2 resharding): the weights, the optimizer state, the step count, the schedule and which
samples the rest of the epoch uses.  What does not: the composition of the later global
batches when ``batch_size x world size`` changes, every rank's random number generators
(they continue from rank 0's), and the summation order of the all-reduces, so the final
weights agree to float tolerance, not bit for bit.
"""

from __future__ import annotations

from typing import Any

from overt.checkpoint.codec import CheckpointError


def adapt_position(trainer: Any, meta: dict[str, Any]) -> list[str]:
    """Translate ``trainer.state``'s position in the epoch to this run's processes; returns notes."""
    saved_world = int(meta.get("world_size") or 1)
    saved_batch = int((meta.get("config") or {}).get("batch_size") or trainer.config.batch_size)
    world, batch = trainer.parallel.world_size, trainer.config.batch_size
    state = trainer.state
    if (saved_world, saved_batch) == (world, batch):
        return []
    note = (f"the checkpoint was taken with {saved_world} process(es) x batch_size {saved_batch}; this run has "
            f"{world} x {batch}")
    if state.batch_index == 0:
        return [note + "; it continues at the epoch boundary where it was saved"]
    consumed = state.samples_seen * saved_world  # whole global batches only: every rank had the same share
    per_global = batch * world
    steps, rest = divmod(consumed, per_global)
    accumulate = trainer.config.accumulate
    if rest or steps % accumulate or state.batch_index * saved_batch != state.samples_seen:
        raise CheckpointError(
            f"cannot continue {consumed} samples into epoch {state.epoch + 1} with {world} process(es) x "
            f"batch_size {batch}: that is not a whole number of the new global batches",
            where=note,
            why="each rank must start at a batch boundary of the new split of the epoch",
            fix=f"resume with {saved_world} processes (nproc={saved_world}) and batch_size={saved_batch}, "
                "or from a checkpoint taken at an epoch boundary",
        )
    state.batch_index, state.samples_seen = steps, steps * batch
    return [note + f"; the epoch continues after {consumed} samples ({steps} global batches of {per_global})"]


def own_rng(restored: Any, rank: int, world_size: int) -> tuple[dict[str, Any] | None, str | None]:
    """This rank's saved RNG states (and a note when they cannot be exact: another world size)."""
    saved = restored.objects.get("rank_rng")
    if not saved:
        return restored.rng, None
    states = saved["states"]
    if len(states) == world_size:
        return states[rank], None
    return states[0], (f"the checkpoint was saved by {len(states)} processes and this run has {world_size}: "
                       "every rank continues from rank 0's random number generators, so dropout and other "
                       "random draws differ from an uninterrupted run")
