"""No file of a sharded (torch.distributed.checkpoint) checkpoint runs code when loaded.

torch's own reader unpickles ``.metadata`` with ``pickle.load`` and non-tensor shard values with
``torch.load(weights_only=False)``; overt's reader (overt.distributed.dcp_safe) refuses anything but
DCP's metadata types and plain data.  Each test first shows that torch's reader does run the
payload (so the test can fail), then that overt's does not."""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.state_dict import get_state_dict

from overt.checkpoint import CheckpointError
from overt.distributed.dcp_safe import load as safe_load
from overt.distributed.dcp_safe import load_metadata


class Payload:
    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def _model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    return model, opt


def _save(folder: Path, state) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        dcp.save(state, checkpoint_id=str(folder))


def _load(folder: Path, state, safe: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if safe:
            safe_load(state, str(folder))
        else:
            dcp.load(state, checkpoint_id=str(folder), planner=DefaultLoadPlanner())


def test_a_clean_sharded_checkpoint_round_trips_through_the_safe_reader(tmp_path):
    model, opt = _model()
    msd, osd = get_state_dict(model, opt)
    _save(tmp_path / "dcp", {"model": msd, "optimizer": osd})
    fresh, fresh_opt = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), None
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.5)
    fresh(torch.randn(2, 3)).sum().backward()
    fresh_opt.step()
    fmsd, fosd = get_state_dict(fresh, fresh_opt)
    state = {"model": fmsd, "optimizer": fosd}
    _load(tmp_path / "dcp", state, safe=True)
    for key, value in msd.items():
        assert torch.equal(state["model"][key], value)
    assert state["optimizer"]["param_groups"][0]["lr"] == 0.01  # a non-tensor value, read as plain data
    assert torch.equal(state["optimizer"]["state"]["0.weight"]["exp_avg"], osd["state"]["0.weight"]["exp_avg"])


def test_a_payload_in_place_of_dot_metadata_never_runs(tmp_path):
    model, opt = _model()
    msd, osd = get_state_dict(model, opt)
    _save(tmp_path / "dcp", {"model": msd, "optimizer": osd})
    marker = tmp_path / "pwned"
    (tmp_path / "dcp" / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(BaseException):
        _load(tmp_path / "dcp", {"model": get_state_dict(model, opt)[0]}, safe=False)
    assert marker.exists()  # torch's reader ran it
    marker.unlink()
    with pytest.raises(CheckpointError, match=r"asks for posix\.system, which is not part of a "
                                              r"torch\.distributed\.checkpoint metadata file"):
        _load(tmp_path / "dcp", {"model": get_state_dict(model, opt)[0]}, safe=True)
    assert not marker.exists()
    with pytest.raises(CheckpointError, match="asks for builtins.eval"):
        load_metadata(b"cbuiltins\neval\n(S'1'\ntR.", "m")
    with pytest.raises(CheckpointError, match="holds a dict, not checkpoint metadata"):
        load_metadata(pickle.dumps({}), "m")
    with pytest.raises(CheckpointError, match="not a readable checkpoint metadata file"):
        load_metadata(b"\x80\x04garbage", "m")


def test_a_payload_inside_a_shard_never_runs(tmp_path):
    """A non-tensor value in a .distcp shard, as an optimizer hyper-parameter is stored."""
    marker = tmp_path / "pwned"
    _save(tmp_path / "dcp", {"w": torch.zeros(2), "hyper": Payload(marker)})
    assert not marker.exists()  # pickling did not run it
    state = {"w": torch.ones(2), "hyper": None}
    _load(tmp_path / "dcp", state, safe=False)
    assert marker.exists()  # torch's planner ran it
    marker.unlink()
    state = {"w": torch.ones(2), "hyper": None}
    with pytest.raises(CheckpointError, match="'hyper' in a checkpoint shard is not plain data"):
        _load(tmp_path / "dcp", state, safe=True)
    assert not marker.exists()


def _forge(ckpt: Path) -> None:
    """Re-write every hash overt checks (shard list in state.json, then the manifest), as anyone who
    can write the run directory can."""
    import hashlib
    import json

    def digest(path: Path) -> dict:
        data = path.read_bytes()
        return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    state = json.loads((ckpt / "state.json").read_text())
    sharded = state["meta"]["sharded"]
    folder = ckpt / sharded.get("folder", "dcp")
    sharded["files"] = {name: digest(folder / name) for name in sharded["files"]}
    (ckpt / "state.json").write_text(json.dumps(state))
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["files"] = {name: digest(ckpt / name) for name in manifest["files"]}
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["dcp/.metadata", "dcp/__0_0.distcp", "state.safetensors", "config.yaml"])
def test_fsdp_resume_with_a_payload_in_any_file_and_reforged_hashes_runs_nothing(tmp_path, target):
    import shutil
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    run = tmp_path / "run"
    first = subprocess.run([sys.executable, "-m", "overt", "train", "digits", "epochs=1", "progress=off",
                            "strategy=fsdp", f"run_dir={run}", "nproc=2", "tensorboard=false"],
                           capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert first.returncode == 0, first.stderr[-3000:]
    for name in ("summary.json", "model.safetensors"):
        (run / name).unlink()
    ckpts = sorted((run / "checkpoints").iterdir())
    for older in ckpts[:-1]:
        shutil.rmtree(older)  # nothing to fall back on: the payload is the only way forward
    ckpt = ckpts[-1]
    marker = tmp_path / "pwned"
    if target == "config.yaml":
        (run / target).write_text(f"!!python/object/apply:os.system [\"touch '{marker}'\"]\n")
    else:
        (ckpt / target).write_bytes(pickle.dumps(Payload(marker)))
        _forge(ckpt)
    resumed = subprocess.run([sys.executable, "-m", "overt", "resume", str(run), "nproc=2"],
                             capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert not marker.exists()
    assert "Traceback" not in resumed.stderr, resumed.stderr[-3000:]
    if target == "config.yaml":  # resume reads the configuration from the checkpoint, YAML safely anywhere
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    else:
        assert resumed.returncode != 0 and "unusable" in resumed.stderr or "not loaded" in resumed.stderr \
            or "cannot load the sharded state" in resumed.stderr, resumed.stderr[-3000:]
