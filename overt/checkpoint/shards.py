"""The shard files of an FSDP2 checkpoint (``dcp/``), checked against the hashes its ``state.json``
lists, before anything reads them.  Plain files and hashes, no ``torch.distributed``: the
checkpoint store checks a sharded checkpoint when it chooses one to resume from, and
:mod:`overt.distributed.dcp` (which writes and reads the shards) checks them before loading."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from overt.checkpoint.codec import CheckpointError

#: the folder of a checkpoint that holds the shards
SHARDS = "dcp"


def verify_shards(restored: Any) -> Path:
    """Check every shard file against the hashes in state.json (itself verified by the manifest)."""
    info = restored.meta["sharded"]
    if not isinstance(info, dict) or not isinstance(info.get("folder", SHARDS), str) \
            or not isinstance(info.get("files") or {}, dict):
        raise CheckpointError(f"{restored.path.name}: state.json describes its shards in a malformed way",
                              fix="use an older checkpoint")
    folder = Path(restored.path) / info.get("folder", SHARDS)
    if getattr(restored, "shards_verified", False):  # checked when the checkpoint was chosen
        return folder
    expected: dict[str, dict[str, Any]] = info.get("files") or {}
    if not expected:
        raise CheckpointError(f"{restored.path.name}: the sharded checkpoint lists no shard files",
                              fix="use an older checkpoint")
    for name, spec in expected.items():
        path = folder / name
        if not isinstance(spec, dict) or ".." in Path(name).parts or Path(name).is_absolute():
            raise CheckpointError(f"{restored.path.name}: the shard list names an invalid file {name!r}",
                                  fix="use an older checkpoint")
        if not path.is_file():
            raise CheckpointError(f"{restored.path.name}: shard {name} is missing", fix="use an older checkpoint")
        data = path.read_bytes()
        if len(data) != spec.get("bytes") or hashlib.sha256(data).hexdigest() != spec.get("sha256"):
            raise CheckpointError(f"{restored.path.name}: shard {name} does not match its size/SHA-256",
                                  why="the file was cut short or changed after the save",
                                  fix="use an older checkpoint")
    return folder
