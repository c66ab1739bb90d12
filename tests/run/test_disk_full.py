"""A full disk at the three places that used to crash with a raw traceback and leave ``status.json``
saying ``running``: ``guards.json`` written while the run is already failing, the final
``model.safetensors`` (safetensors raises ``SafetensorError``, not ``OSError``) and ``config.yaml`` at
the start of a resumed run.  Each gives overt's "the disk is full" error, ``status.json`` ``failed``
with the reason, and leaves the checkpoints intact.

The disk is a real small tmpfs (``mount -t tmpfs``, root only; skipped otherwise), filled by a ballast
file at the chosen moment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import torch
from torch import nn

from overt.errors import DiskFullError


@pytest.fixture
def disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                                           capture_output=True, timeout=60).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False, timeout=60)


def fill(mount: Path) -> None:
    """Leave no free byte on ``mount``."""
    for chunk in (65536, 1):
        try:
            with open(mount / f"ballast-{uuid.uuid4().hex}", "wb") as fh:
                while True:
                    fh.write(b"\0" * chunk)
                    fh.flush()
        except OSError:
            pass


def empty(mount: Path) -> None:
    for path in mount.glob("ballast-*"):
        path.unlink()


from overt.engine.callbacks import Callback  # noqa: E402


class _FillAt(Callback):
    """Fills the disk at optimizer step 3 (then raises an error of its own) or at the end of fit."""

    def __init__(self, mount, hook, raise_error=False):
        self.mount, self.hook, self.raise_error = mount, hook, raise_error

    def on_step_end(self, trainer, logs):
        if self.hook == "on_step_end" and trainer.state.global_step == 3:
            fill(self.mount)
            if self.raise_error:
                raise RuntimeError("the real error the run ends with")

    def on_fit_end(self, trainer, summary):
        if self.hook == "on_fit_end":
            fill(self.mount)


def _trainer(run_dir, callbacks=(), **kw):
    import overt
    from sklearn.datasets import load_digits
    from torch.utils.data import TensorDataset

    d = load_digits()
    x = torch.tensor(d.data[:256], dtype=torch.float32) / 16.0
    y = torch.tensor(d.target[:256])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return overt.Trainer(model, torch.optim.AdamW(model.parameters(), lr=3e-3), nn.CrossEntropyLoss(),
                         TensorDataset(x[:192], y[:192]), TensorDataset(x[192:], y[192:]), epochs=1, batch_size=32,
                         progress="off", tensorboard=False, checkpoint_background=False, run_dir=run_dir,
                         callbacks=list(callbacks), **kw)


def _verified(run_dir: Path) -> list[str]:
    from overt.checkpoint.store import list_checkpoints, verify_and_read

    return [verify_and_read(e.path).path.name for e in list_checkpoints(run_dir / "checkpoints")]


def test_guards_json_on_a_full_disk_does_not_hide_the_error_the_run_failed_with(disk, capsys):
    run_dir = disk / "run"
    with pytest.raises(RuntimeError, match="the real error"):
        _trainer(run_dir, [_FillAt(disk, "on_step_end", raise_error=True)], checkpoint_every_steps=2).fit()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and "the real error" in status["error"]
    assert "guards' findings could not be written" in capsys.readouterr().err
    assert _verified(run_dir) == ["step-000002"]


def test_the_final_weights_on_a_full_disk_give_the_disk_full_error(disk):
    run_dir = disk / "run"
    with pytest.raises(DiskFullError, match="the disk is full: cannot write the finished run's model.safetensors"):
        _trainer(run_dir, [_FillAt(disk, "on_fit_end")]).fit()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and "the disk is full" in status["error"]
    assert not (run_dir / "model.safetensors").exists() and not (run_dir / "summary.json").exists()
    assert _verified(run_dir) == ["step-000006"]  # the one epoch, 192 samples / 32


def test_config_yaml_on_a_full_disk_when_a_run_is_resumed(disk, capsys):
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    run_dir = disk / "run"
    assert train(["digits", "epochs=1", "progress=off", "tensorboard=false", f"run_dir={run_dir}"]) == 0
    (run_dir / "summary.json").unlink()  # as if it had been stopped after its checkpoint
    before = _verified(run_dir)
    fill(disk)
    assert resume([str(run_dir), "progress=off", "tensorboard=false"]) == 2
    err = capsys.readouterr().err
    assert "the disk is full" in err and "Traceback" not in err, err
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and "the disk is full" in status["error"]
    assert _verified(run_dir) == before
    empty(disk)  # with room again, the run continues
    assert resume([str(run_dir), "progress=off", "tensorboard=false"]) == 0


def test_the_run_files_at_the_start_of_fit_on_a_full_disk(disk):
    from overt.checkpoint import resume

    run_dir = disk / "run"
    _trainer(run_dir).fit()
    (run_dir / "summary.json").unlink()
    before = _verified(run_dir)
    again = _trainer(run_dir)
    resume(again)
    fill(disk)
    with pytest.raises(DiskFullError, match="the disk is full: cannot write (metrics.jsonl|the run's config.yaml)"):
        again.fit()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and "the disk is full" in status["error"]
    assert _verified(run_dir) == before


def test_the_run_writer_says_disk_full_when_config_yaml_cannot_be_written(disk):
    from overt.run.writer import RunWriter

    run_dir = disk / "run"
    trainer = _trainer(run_dir)
    run_dir.mkdir()
    (run_dir / "status.json").write_text('{"status": "stopped"}\n')  # a run being resumed
    fill(disk)
    with pytest.raises(DiskFullError, match="cannot write the run's config.yaml"):
        RunWriter(run_dir).on_fit_start(trainer)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and "the disk is full" in status["error"]
    from overt.run import lock

    assert not lock.is_held_here(run_dir)
