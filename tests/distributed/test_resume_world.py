"""`overt resume RUN` without nproc= resumes with the number of processes that saved the checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch.distributed as dist
from torch import nn

from overt.checkpoint import Checkpointer
from overt.cli.resume import saved_world_size
from tests.conftest import REPO


def test_saved_world_size_reads_the_newest_checkpoint(tmp_path):
    ckpt = Checkpointer(tmp_path / "checkpoints")
    model = nn.Linear(2, 2)
    ckpt.save(1, {"model": model}, meta={"world_size": 1})
    assert saved_world_size(tmp_path) == 1
    ckpt.save(2, {"model": model}, meta={"world_size": 3})
    assert saved_world_size(tmp_path) == 3
    assert saved_world_size(tmp_path / "checkpoints" / "step-000001") == 1
    (tmp_path / "checkpoints" / "step-000002" / "state.json").write_text("{not json")
    assert saved_world_size(tmp_path) is None  # the workers verify and say what is wrong
    assert saved_world_size(tmp_path / "nothing") is None


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="no gloo")
def test_resume_without_nproc_uses_the_saved_world_size(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    run = tmp_path / "run"
    first = subprocess.run([sys.executable, "-m", "overt", "train", "digits", "epochs=2", "progress=off",
                            f"run_dir={run}", "nproc=2", "tensorboard=false"],
                           capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert first.returncode == 0, first.stderr[-3000:]
    # as if the job had been stopped after epoch 1 (the message then says `overt resume RUN`)
    shutil.rmtree(sorted((run / "checkpoints").iterdir())[-1])
    for name in ("summary.json", "model.safetensors"):
        (run / name).unlink()
    more = subprocess.run([sys.executable, "-m", "overt", "resume", str(run)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert more.returncode == 0, more.stderr[-3000:]
    assert "saved by 2 processes: resuming with nproc=2" in more.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["epochs"] == 2
