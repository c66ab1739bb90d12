"""FSDP2 checkpoints: ``torch.distributed.checkpoint`` shards under overt's atomic commit and manifest.

Layout of ``checkpoints/step-NNNNNN/`` for ``strategy=fsdp``::

    dcp/                 model and optimizer, sharded: each rank writes its own shards
                         (torch.distributed.checkpoint's FileSystemWriter: ``.metadata``, ``*.distcp``)
    state.safetensors    every other tensor (per-rank RNG states, GradScaler, ...)
    state.json           positions, scheduler, config, versions; ``meta.sharded`` lists the size
                         and SHA-256 of every file under ``dcp/``
    manifest.json        size and SHA-256 of state.json and state.safetensors; written last

Saving is a collective: rank 0 names a hidden temporary folder and tells the others; every rank
writes its shards there; rank 0 hashes them, writes the rest and renames the folder into place
(:func:`overt.checkpoint.store.write_snapshot`), then every rank waits at a barrier.  A crash
at any point leaves no folder with a checkpoint's name.  Loading verifies the manifest
(state.json, whose hash list covers the shards), then each shard's hash, then lets
``torch.distributed.checkpoint`` read the shards this rank needs -- with any number of
processes: the saved shards are resharded to the current world size.  Nothing in the shards is
unpickled freely: ``.metadata`` goes through an unpickler restricted to DCP's metadata types and
non-tensor values through ``torch.load(weights_only=True)`` (:mod:`overt.distributed.dcp_safe`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from overt.checkpoint.codec import CheckpointError
from overt.checkpoint.shards import SHARDS, verify_shards
from overt.torchrun import Topology


def _hash_tree(folder: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out[str(path.relative_to(folder))] = {"bytes": path.stat().st_size, "sha256": digest}
    return out


def _broadcast(value: Any) -> Any:
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_rng() -> list[dict[str, Any]] | None:
    """Every rank's RNG states, on rank 0 (None elsewhere); a collective."""
    import torch.distributed as dist

    from overt.checkpoint.rng import capture_rng

    state = capture_rng()
    group = Topology.of_group()
    if group.world_size == 1:
        return [state]
    out: list[Any] = [None] * group.world_size if group.is_main else []
    dist.gather_object(state, out if group.is_main else None, dst=0)
    return out if group.is_main else None


def save_sharded(checkpointer: Any, step: int, objects: dict[str, Any], *, metric: float | None,
                 meta: dict[str, Any]) -> Path:
    """Save ``objects`` (``model``: an FSDP2 module, ``optimizer`` and plain stateful objects) as one
    checkpoint; every rank calls it.  Returns the final path (the same on every rank)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from overt.checkpoint.store import clean_stale, checkpoint_name, tmp_name, write_snapshot

    root = Path(checkpointer.directory)
    group = Topology.of_group()
    rank = group.rank
    tmp = None
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        if not checkpointer._cleaned:
            clean_stale(root)
            checkpointer._cleaned = True
        tmp = tmp_name(root, step)
        tmp.mkdir()
    tmp = Path(_broadcast(str(tmp) if tmp is not None else None))
    model, optimizer = objects["model"], objects["optimizer"]
    model_sd, optim_sd = get_state_dict(model, optimizer)
    try:
        dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=str(tmp / SHARDS))
    except BaseException as exc:
        if rank == 0:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        from overt.run.atomic import is_disk_full

        if is_disk_full(exc):
            raise checkpointer._disk_full(step) from None
        raise
    rngs = gather_rng()
    final = root / checkpoint_name(step)
    if rank == 0:
        rest = {k: v for k, v in objects.items() if k not in ("model", "optimizer")}
        rest["rank_rng"] = {"world_size": len(rngs), "states": rngs}
        meta = {**meta, "sharded": {"format": "torch.distributed.checkpoint", "folder": SHARDS,
                                    "world_size": group.world_size, "files": _hash_tree(tmp / SHARDS)}}
        snap = checkpointer.snapshot(step, rest, metric=metric, meta=meta)
        try:
            path = write_snapshot(snap, root, tmp=tmp)
        except Exception as exc:
            from overt.run.atomic import is_disk_full

            if is_disk_full(exc):
                raise checkpointer._disk_full(step) from None
            raise
        checkpointer.last_saved = path
        checkpointer.prune(protect=path)
    dist.barrier()  # every rank returns once the checkpoint is committed
    checkpointer.last_saved = final
    return final


def is_sharded(restored: Any) -> bool:
    return bool(restored.meta.get("sharded"))


def load_sharded(restored: Any, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load the sharded model and optimizer of ``restored`` into this rank's FSDP2 ``model`` and
    ``optimizer``, resharding when the world size differs from the saved one.  A collective."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    from torch.distributed.checkpoint.api import CheckpointException

    from overt.distributed.dcp_safe import load as safe_load

    folder = verify_shards(restored)
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optimizer": optim_sd}
    try:
        safe_load(state, str(folder))
    except CheckpointError:
        raise
    except (Exception, CheckpointException) as exc:  # torch's CheckpointException is a BaseException
        from overt.distributed.dcp_safe import describe

        raise CheckpointError(f"cannot load the sharded state of {restored.path.name}: {describe(exc)}",
                              why="the model or optimizer differs from the one that was saved, or a shard is "
                                  "damaged or was not written by overt",
                              fix="build the run the same way as the one that was saved, or use an older "
                                  "checkpoint") from None
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
