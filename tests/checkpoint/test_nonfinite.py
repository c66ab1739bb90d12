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
from overt.cli.resume import main as resume


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


NAN_SAMPLE = '''
import math, torch
from overt.engine.data import EpochSampler
from overt.recipes import digits
defaults = dict(digits.defaults, epochs=2)
def build(cfg):
    recipe = digits.build(cfg)
    x, y = recipe.train_data.tensors
    x = x.clone()
    # the first sample of the 13th batch of epoch 0: optimizer step 13 sees it
    x[int(EpochSampler(len(x), seed=cfg.seed).order()[32 * 12]), 7] = {value}
    recipe.train_data = torch.utils.data.TensorDataset(x, y)
    return recipe
'''


@pytest.mark.parametrize("value", ["math.nan", "math.inf"])
def test_a_nan_sample_never_rotates_the_finite_checkpoints_out(tmp_path, capsys, value):
    from overt.checkpoint.store import verify_and_read
    from overt.cli.train import main as train

    recipe = tmp_path / f"nan_sample_{value.split('.')[1]}.py"
    recipe.write_text(NAN_SAMPLE.format(value=value))
    run_dir = tmp_path / "run"
    # guards off: the checkpoints alone must keep the good state (keep_last=3 by default)
    assert train([str(recipe), f"run_dir={run_dir}", "checkpoint_every_steps=5", "guards=false",
                  "progress=off", "tensorboard=false"]) == 2
    err = capsys.readouterr().err
    assert "the state at step 15 holds NaN/inf (net.0.weight" in err and "it was not saved" in err
    assert "newest finite checkpoint: " in err and "step-000010" in err
    assert f"`overt resume {run_dir}` continues from step-000010" in err
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert saved == ["step-000005", "step-000010"]
    for name in saved:
        verify_and_read(run_dir / "checkpoints" / name)  # finite, or it would raise
    assert json.loads((run_dir / "status.json").read_text())["status"] == "failed"
    # resuming continues from the finite one and, the NaN sample still there, stops the same way
    assert resume([str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "resuming from" in err and "step-000010" in err and "the state at step 15 holds NaN/inf" in err
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == saved


def test_the_guards_stop_names_the_newest_finite_checkpoint(tmp_path, capsys):
    from overt.cli.train import main as train

    recipe = tmp_path / "nan_sample_guarded.py"
    recipe.write_text(NAN_SAMPLE.format(value="math.nan"))
    run_dir = tmp_path / "run"
    assert train([str(recipe), f"run_dir={run_dir}", "checkpoint_every_steps=5", "log_every=1",
                  "progress=off", "tensorboard=false"]) == 2
    err = capsys.readouterr().err
    assert "non-finite" in err and "newest finite checkpoint:" in err and "step-000010" in err
