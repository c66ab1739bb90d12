"""Format detection is exact: every valid safetensors file is read as one, whatever its header
size; a pickle or a torch.save archive is still named and refused.

A safetensors file starts with its header length as 8 little-endian bytes, so a header of 128,
384, 640 ... 1408 bytes starts with the bytes ``80 00``..``80 05`` -- a pickle's PROTO opcode.
Checking for a pickle first refused those valid files (16 of 400 in a sweep of submodule names)."""

from __future__ import annotations

import pickle
from collections import OrderedDict

import pytest
import torch
from safetensors.torch import save
from torch import nn

from overt.checkpoint import Checkpointer, CheckpointError, load_weights
from overt.checkpoint.store import read_safetensors, sniff, sniff_file


def _padded(header_size: int) -> bytes:
    """A valid safetensors file (one float32 tensor) whose JSON header is exactly ``header_size``
    bytes: safetensors pads its header with spaces, which any size may carry."""
    blob = save({"w": torch.arange(4, dtype=torch.float32)})
    n = int.from_bytes(blob[:8], "little")
    header = blob[8:8 + n].rstrip(b" ")
    assert header_size >= len(header)
    return header_size.to_bytes(8, "little") + header + b" " * (header_size - len(header)) + blob[8 + n:]


def test_every_header_size_that_looks_like_a_pickle_opcode_is_read():
    """Every header size from the smallest possible up to 4 KiB, and every size whose first two
    bytes read as a pickle PROTO opcode up to 64 KiB."""
    smallest = len(save({"w": torch.zeros(4)})[8:].split(b"}}")[0]) + 2
    sizes = list(range(smallest, 4096)) + [s for s in range(4096, 1 << 16) if s % 256 == 128 or s >> 8 == 0x80]
    refused = []
    for size in sizes:
        data = _padded(size)
        if sniff(data) is not None:
            refused.append(size)
            continue
        assert torch.equal(read_safetensors(None, data)["w"], torch.arange(4, dtype=torch.float32))
    assert refused == []
    assert any(_padded(s)[:1] == b"\x80" and _padded(s)[1] <= 5 for s in sizes)  # the sweep hit the trap


def test_submodule_names_of_every_length_from_1_to_400_load(tmp_path):
    """One nn.Linear under a submodule name of each length: 0 of 400 weight files refused."""
    refused = []
    looked_like_pickles = 0
    for k in range(1, 401):
        model = nn.Sequential(OrderedDict([("a" * k, nn.Linear(2, 2))]))
        path = tmp_path / f"w{k}.safetensors"
        from safetensors.torch import save_file

        save_file(model.state_dict(), str(path), metadata={"format": "pt"})
        head = path.read_bytes()[:2]
        looked_like_pickles += head[0] == 0x80 and head[1] <= 5
        try:
            load_weights(nn.Sequential(OrderedDict([("a" * k, nn.Linear(2, 2))])), path)
        except CheckpointError as exc:
            refused.append((k, exc.what))
        assert sniff_file(path) is None
    assert refused == []
    assert looked_like_pickles > 0  # the sweep does include the files the old check refused


def test_a_checkpoint_whose_weights_header_looks_like_a_pickle_resumes(tmp_path):
    """A plain MLP (three hidden layers of 40) whose model.safetensors header is 384 bytes."""
    model = nn.Sequential(nn.Linear(64, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 40),
                          nn.ReLU(), nn.Linear(40, 10))
    holder = nn.Module()
    holder.layers = model
    ckpt = Checkpointer(tmp_path)
    path = ckpt.save(1, {"model": holder, "optimizer": torch.optim.Adam(holder.parameters())})
    head = (path / "model.safetensors").read_bytes()[:2]
    assert head[0] == 0x80 and head[1] <= 5
    fresh = nn.Module()
    fresh.layers = nn.Sequential(nn.Linear(64, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 40),
                                 nn.ReLU(), nn.Linear(40, 10))
    ckpt.restore({"model": fresh, "optimizer": torch.optim.Adam(fresh.parameters())}, path=path)
    assert torch.equal(fresh.layers[0].weight, model[0].weight)


@pytest.mark.parametrize("kind", ["pickle", "torch.save", "garbage", "empty", "bad header json"])
def test_other_formats_are_still_named(tmp_path, kind):
    path = tmp_path / "w.bin"
    if kind == "pickle":
        path.write_bytes(pickle.dumps({"w": 1}))
        expected = "a Python pickle"
    elif kind == "torch.save":
        torch.save({"w": torch.zeros(2)}, path)
        expected = "a torch.save/zip archive (which holds a pickle)"
    elif kind == "garbage":
        path.write_bytes(b"hello world, not weights at all")
        expected = "not a safetensors file"
    elif kind == "empty":
        path.write_bytes(b"")
        expected = "not a safetensors file"
    else:  # a pickle whose first 8 bytes also read as a plausible header length: still not safetensors
        path.write_bytes(b"\x80\x02" + b"\0" * 6 + b"{" + b"x" * 200)
        expected = "a Python pickle"
    assert sniff(path.read_bytes()) == expected
    assert sniff_file(path) == expected
    with pytest.raises(CheckpointError, match="not a safetensors file; it was not loaded"):
        read_safetensors(path)
