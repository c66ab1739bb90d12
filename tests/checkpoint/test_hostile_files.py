"""Only regular files are ever opened from a checkpoint: a FIFO, a folder, a device or a name
with a NUL byte in place of a checkpoint file is an error that names it -- never a hang, never
an endless read, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from overt.cli.resume import main as resume


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize("plant, kind", [(_fifo, "is a FIFO"), (_folder, "is a folder"),
                                         (_dev_zero, "a symbolic link")])
@pytest.mark.parametrize("name", ["model.safetensors", "manifest.json"])
def test_a_checkpoint_file_that_is_not_a_regular_file(tmp_path, capsys, two_epochs, plant, kind, name):
    run_dir = tmp_path / "run"
    shutil.copytree(two_epochs, run_dir)
    for ckpt in (run_dir / "checkpoints").iterdir():
        target = ckpt / name
        target.unlink()
        plant(target)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(resume([str(run_dir), "progress=off"])), daemon=True)
    worker.start()
    worker.join(60)
    assert result == [2], "overt resume hung on a FIFO" if not result else result
    err = capsys.readouterr().err
    assert kind in err and "Traceback" not in err, err


def test_a_manifest_naming_a_file_with_a_nul_byte(tmp_path, capsys, two_epochs):
    run_dir = tmp_path / "run"
    shutil.copytree(two_epochs, run_dir)
    for ckpt in (run_dir / "checkpoints").iterdir():
        manifest_path = ckpt / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["files"]["model\0.safetensors"] = manifest["files"].pop("model.safetensors")
        manifest_path.write_text(json.dumps(manifest))
    assert resume([str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "the manifest names an invalid file 'model\\x00.safetensors'" in err and "Traceback" not in err


def test_a_checkpoint_folder_linked_from_another_run_is_refused(tmp_path, capsys, two_epochs):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text((two_epochs / "config.yaml").read_text())
    (other / "checkpoints").symlink_to(two_epochs / "checkpoints")
    assert resume([str(other)]) == 2
    err = capsys.readouterr().err
    assert "belongs to another run" in err and f"written by the run {two_epochs}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("key, value", [("step", "abc"), ("step", -1), ("version", "1"), ("bytes", 10 ** 20),
                                        ("bytes", 1e20), ("bytes", True), ("sharded", [1])])
def test_a_manifest_or_state_with_wrong_json_types_falls_back_to_the_previous_checkpoint(
        tmp_path, capsys, two_epochs, key, value):
    run_dir = tmp_path / "run"
    shutil.copytree(two_epochs, run_dir)
    (run_dir / "summary.json").unlink()
    newest = run_dir / "checkpoints" / "step-000090"
    manifest_path = newest / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if key == "bytes":
        manifest["files"]["state.json"]["bytes"] = value
    elif key == "sharded":  # a malformed shard list inside state.json (its hash updated to match)
        import hashlib

        state = json.loads((newest / "state.json").read_text())
        state["meta"]["sharded"] = value
        data = json.dumps(state).encode()
        (newest / "state.json").write_bytes(data)
        manifest["files"]["state.json"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    else:
        manifest[key] = value
    manifest_path.write_text(json.dumps(manifest))
    assert resume([str(run_dir), "progress=off", "tensorboard=false"]) == 0
    err = capsys.readouterr().err
    assert "checkpoint" in err and "step-000090 is unusable" in err and "Traceback" not in err, err
    assert "resuming from" in err and "step-000045" in err
