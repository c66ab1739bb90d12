"""Reading ``torch.distributed.checkpoint`` shards without running code from the run directory.

torch's own reader runs two unrestricted unpicklers on files of a checkpoint: ``pickle.load`` on
``dcp/.metadata`` and ``torch.load(weights_only=False)`` on every non-tensor value stored in a
``*.distcp`` shard (the optimizer's hyper-parameters).  Anyone who can write the run directory can
also re-forge the hashes overt checks, so hashes alone do not stop a payload.  Here:

- ``.metadata`` is read by :class:`MetadataUnpickler`, which resolves only the dozen types DCP's
  metadata is made of (its dataclasses, ``torch.Size``, dtypes, layouts, paths); any other global
  -- ``os.system``, ``builtins.eval``, ``subprocess.Popen`` -- is refused before anything is built;
- non-tensor values are read with ``torch.load(weights_only=True)`` (numbers, strings, lists,
  tuples, dicts, tensors: torch's restricted unpickler), as DCP already does for tensors.

A refused file raises :class:`overt.checkpoint.codec.CheckpointError`, naming the file and the
global it asked for.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from overt.checkpoint.codec import CheckpointError

_METADATA_MODULE = "torch.distributed.checkpoint.metadata"
_ALLOWED: dict[tuple[str, str], Any] = {}


def _allowed() -> dict[tuple[str, str], Any]:
    """The globals a DCP ``.metadata`` file may name: DCP's metadata types and the plain torch
    values inside them.  None of them runs code when built from pickled arguments."""
    if not _ALLOWED:
        import pathlib

        import torch.distributed.checkpoint.filesystem as fs
        import torch.distributed.checkpoint.metadata as md
        import torch.serialization as ser

        for name in ("Metadata", "MetadataIndex", "StorageMeta", "TensorProperties", "TensorStorageMetadata",
                     "ChunkStorageMetadata", "BytesStorageMetadata", "_MEM_FORMAT_ENCODING"):
            if hasattr(md, name):
                _ALLOWED[(_METADATA_MODULE, name)] = getattr(md, name)
        _ALLOWED[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = fs._StorageInfo
        _ALLOWED[("torch.serialization", "_get_layout")] = ser._get_layout
        _ALLOWED[("torch", "Size")] = torch.Size
        for name, value in vars(torch).items():
            if isinstance(value, torch.dtype):
                _ALLOWED[("torch", name)] = value
        for name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "Path"):
            _ALLOWED[("pathlib", name)] = getattr(pathlib, name)
    return _ALLOWED


class MetadataUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of :func:`_allowed`."""

    def __init__(self, file: Any, source: str) -> None:
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        found = _allowed().get((module, name))
        if found is None:
            raise CheckpointError(
                f"{self.source} asks for {module}.{name}, which is not part of a torch.distributed.checkpoint "
                "metadata file; it was not loaded",
                why="a metadata file naming other Python objects was not written by torch.distributed.checkpoint: "
                    "unpickling it could run arbitrary code",
                fix="use an older checkpoint")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise CheckpointError(f"{self.source} holds a persistent reference, which DCP metadata never does",
                              fix="use an older checkpoint")


def load_metadata(data: bytes, source: str) -> Metadata:
    """Decode the bytes of a DCP ``.metadata`` file with :class:`MetadataUnpickler`."""
    try:
        metadata = MetadataUnpickler(io.BytesIO(data), source).load()
    except CheckpointError:
        raise
    except Exception as exc:  # a damaged file: truncated, wrong opcodes, wrong arguments
        raise CheckpointError(f"{source} is not a readable checkpoint metadata file: {type(exc).__name__}: {exc}",
                              fix="use an older checkpoint") from None
    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"{source} holds a {type(metadata).__name__}, not checkpoint metadata",
                              fix="use an older checkpoint")
    return metadata


class SafeReader(FileSystemReader):
    """:class:`FileSystemReader` whose ``.metadata`` goes through :func:`load_metadata`.

    ``torch.distributed.checkpoint.load`` wraps a reader's exception in its own (and then looks for
    a per-rank metadata file); the refusal is kept in ``refused`` so the caller can raise it."""

    refused: CheckpointError | None = None

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        try:
            return self._read_metadata(*args, **kwargs)
        except CheckpointError as exc:
            self.refused = self.refused or exc
            raise

    def _read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        from overt.checkpoint.store import read_regular

        path = self._get_metadata_path(kwargs.get("rank"))
        try:
            data = read_regular(path)
        except OSError as exc:
            raise CheckpointError(f"cannot read {path}: {exc.strerror or exc}", fix="use an older checkpoint") from None
        metadata = load_metadata(data, str(path))
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """:class:`DefaultLoadPlanner` reading non-tensor values with ``torch.load(weights_only=True)``
    (a refusal is also kept in ``refused``, as for :class:`SafeReader`)."""

    refused: CheckpointError | None = None

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        try:
            obj = torch.load(value, weights_only=True)
        except Exception as exc:
            self.refused = self.refused or CheckpointError(
                f"the value {read_item.dest_index.fqn!r} in a checkpoint shard is not plain data: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                why="a shard value that needs more than numbers, strings, containers and tensors was not written "
                    "by overt: loading it could run arbitrary code",
                fix="use an older checkpoint")
            raise self.refused from None
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


def load(state: dict[str, Any], folder: str) -> None:
    """``torch.distributed.checkpoint.load(state)`` from ``folder`` with :class:`SafeReader` and
    :class:`SafeLoadPlanner`; a refused file raises its :class:`CheckpointError` (on every rank that
    read it), whatever DCP wrapped it in."""
    import torch.distributed.checkpoint as dcp

    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

    reader, planner = SafeReader(folder), SafeLoadPlanner()
    reader.read_metadata()  # refused here, before DCP (which would log the refusal's traceback and retry)
    try:
        dcp.load(state, storage_reader=reader, planner=planner)
    except (Exception, CheckpointException):
        refused = reader.refused or planner.refused
        if refused is not None:
            raise refused from None
        raise


def describe(exc: BaseException) -> str:
    """One line for an exception from ``torch.distributed.checkpoint``: its ``CheckpointException``
    embeds each rank's whole traceback in its text; only the final line of each is kept."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    finals = [line.strip() for line in lines if not line.startswith((" ", "\t")) and not line.startswith("Traceback")
              and not line.startswith("CheckpointException")]
    text = "; ".join(dict.fromkeys(finals)) or (lines[-1].strip() if lines else "")
    return f"{type(exc).__name__}: {text[:500]}"
