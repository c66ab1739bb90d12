"""A file crafted to run code when unpickled, put where a checkpoint belongs, never runs."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from overt.checkpoint import Checkpointer, CheckpointError, load_weights
from tests.checkpoint.conftest import forge_manifest
from tests.conftest import run_overt


class Payload:
    """Unpickling this creates the marker file (the classic pickle exploit)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def evil_bytes(marker: Path) -> bytes:
    return pickle.dumps(Payload(marker))


def test_the_payload_is_real(tmp_path):
    """Sanity: unpickling the crafted bytes does run the code (so the tests below can fail)."""
    marker = tmp_path / "pwned"
    pickle.loads(evil_bytes(marker))
    assert marker.exists()


@pytest.mark.parametrize("where", ["model.safetensors", "state.safetensors"])
def test_a_pickle_in_place_of_a_checkpoint_file_is_refused(tmp_path, where):
    marker = tmp_path / "pwned"
    ckpt = Checkpointer(tmp_path / "ckpts")
    ckpt.save(1, {"model": nn.Linear(2, 2), "optimizer": torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)})
    folder = tmp_path / "ckpts" / "step-000001"
    (folder / where).write_bytes(evil_bytes(marker))
    forge_manifest(folder)
    with pytest.raises(CheckpointError) as info:
        ckpt.load(folder)
    assert f"{where} is a Python pickle, not a safetensors file; it was not loaded" in str(info.value)
    assert "never unpickles" in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
def test_load_weights_refuses_pickles_and_torch_save_files(tmp_path, kind):
    marker = tmp_path / "pwned"
    path = tmp_path / "weights.pt"
    if kind == "pickle":
        path.write_bytes(evil_bytes(marker))
    else:
        torch.save({"weight": torch.zeros(2, 2), "payload": Payload(marker)}, path)
    with pytest.raises(CheckpointError, match="not a safetensors file; it was not loaded") as info:
        load_weights(nn.Linear(2, 2), path)
    assert "weights_only=True" in str(info.value)  # how to convert a trusted file
    with pytest.raises(CheckpointError, match="is a file .*not an overt checkpoint folder"):
        Checkpointer(tmp_path).load(path)
    assert not marker.exists()


def test_overt_resume_skips_a_malicious_newest_checkpoint_and_names_it(tmp_path):
    run_dir = tmp_path / "run"
    done = run_overt("train", "digits", f"run_dir={run_dir}", "epochs=2", "progress=off", "tensorboard=false")
    assert done.returncode == 0, done.stderr
    ckpts = run_dir / "checkpoints"
    newest = sorted(ckpts.iterdir())[-1]
    evil = ckpts / "step-000999"
    shutil.copytree(newest, evil)
    marker = tmp_path / "pwned"
    (evil / "model.safetensors").write_bytes(evil_bytes(marker))
    forge_manifest(evil)
    resumed = run_overt("resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert "step-000999 is unusable" in resumed.stderr and "is a Python pickle" in resumed.stderr
    assert f"resuming from {newest}" in resumed.stderr
    assert not marker.exists()
    # with nothing else to fall back on, the command fails with the reason
    for other in ckpts.iterdir():
        if other.name != "step-000999.bad":
            shutil.rmtree(other)
    (ckpts / "step-000999.bad").rename(evil)
    failed = run_overt("resume", str(run_dir))
    assert failed.returncode == 2
    assert "no valid checkpoint" in failed.stderr and "is a Python pickle" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert not marker.exists()
