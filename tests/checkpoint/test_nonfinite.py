"""Non-finite weights are never checkpointed over good ones, and never continued from."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from overt.checkpoint import CheckpointError, load_weights
from overt.checkpoint.cli import main as resume


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory) -> Path:
    from overt.cli.train import main as train

    run_dir = tmp_path_factory.mktemp("nonfinite") / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=2", "progress=off", "tensorboard=false",
                  "guards=false"]) == 0
    return run_dir


def poison(checkpoint: Path) -> None:
    """Put a NaN into the saved weights and forge the manifest so that the files still verify
    (what a diverged run saved by a tool without overt's check looks like)."""
    from safetensors.torch import load_file, save_file

    path = checkpoint / "model.safetensors"
    tensors = load_file(str(path))
    key = sorted(tensors)[0]
    tensors[key].view(-1)[0] = math.nan
    save_file(tensors, str(path), metadata={"format": "pt"})
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    data = path.read_bytes()
    manifest["files"]["model.safetensors"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))


def test_resume_never_continues_from_nan_weights(tmp_path, capsys, two_epochs):
    run_dir = tmp_path / "run"
    shutil.copytree(two_epochs, run_dir)
    ckpts = run_dir / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-000045", "step-000090"]
    poison(ckpts / "step-000090")
    assert resume([str(run_dir), "progress=off"]) == 0
    err = capsys.readouterr().err
    assert "step-000090/model.safetensors holds NaN/inf weights (1 tensor(s): net.0.bias)" in err
    assert "resuming from" in err and "step-000045" in err
    assert (ckpts / "step-000090.bad").is_dir()  # moved aside: never counted again
    from safetensors.torch import load_file

    assert all(torch.isfinite(t).all() for t in load_file(str(run_dir / "model.safetensors")).values())


def test_loading_nan_weights_for_inference_is_refused(tmp_path, two_epochs):
    from overt.recipes.digits import DigitsMLP

    run_dir = tmp_path / "run"
    shutil.copytree(two_epochs, run_dir)
    for ckpt in (run_dir / "checkpoints").iterdir():
        poison(ckpt)
    with pytest.raises(CheckpointError, match="holds NaN/inf weights"):
        load_weights(DigitsMLP(128, 0.1), run_dir)
    with pytest.raises(CheckpointError, match="holds NaN/inf weights"):
        load_weights(DigitsMLP(128, 0.1), run_dir / "checkpoints" / "step-000045" / "model.safetensors")
