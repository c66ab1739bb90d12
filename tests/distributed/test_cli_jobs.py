"""Whole jobs on the command line (slow: each starts torchrun's agent and two workers).

- ``overt train ... nproc=2`` killed with SIGKILL (every process) after a checkpoint, then
  ``overt resume RUN nproc=2``, ends with the same ``model.safetensors`` bytes as an
  uninterrupted ``torchrun --nproc_per_node 2 -m overt train ...`` (DDP and FSDP2);
- SIGTERM to the launcher: every worker stops at one step, saves once, exit status 143;
  ``overt resume`` finishes the run;
- an FSDP2 run saved by 2 processes continues on 3 (resharded).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from tests.conftest import REPO
from tests.distributed.jobs import ARGS, job_env, overt_job, start_job, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="torch.distributed with gloo is not available")]


def _job_pids(root: int) -> list[int]:
    """``root`` and every process below it (torchrun starts each worker in its own session, so
    killing the launcher's process group would leave the workers running)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _kill_job(proc) -> None:
    for pid in _job_pids(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_sigkill_of_the_whole_job_then_resume_is_bit_identical(tmp_path, strategy):
    plain = tmp_path / "plain"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "overt",
                           "train", *ARGS, f"strategy={strategy}", f"run_dir={plain}"],
                          capture_output=True, text=True, env=job_env(), timeout=400, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]

    run = tmp_path / "killed"
    proc = start_job("train", *ARGS, f"strategy={strategy}", f"run_dir={run}", "nproc=2")
    wait_for(run / "checkpoints" / "step-000010" / "manifest.json", proc)
    _kill_job(proc)  # the launcher and both workers, at once
    proc.communicate(timeout=60)
    assert not (run / "summary.json").exists()

    resumed = overt_job("resume", str(run), "nproc=2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    assert (run / "model.safetensors").read_bytes() == (plain / "model.safetensors").read_bytes()


def test_sigterm_to_the_launcher_stops_all_workers_saves_once_and_exits_143(tmp_path):
    run = tmp_path / "run"
    proc = start_job("train", *ARGS, f"run_dir={run}", "nproc=2")
    wait_for(run / "checkpoints" / "step-000005" / "manifest.json", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err[-3000:]
    assert err.count("stopped on SIGTERM") == 1  # rank 0 says it, once
    finished = overt_job("resume", str(run), "nproc=2")
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert (run / "summary.json").exists()


def test_fsdp_run_saved_by_two_processes_continues_on_three(tmp_path):
    import json
    import shutil

    run = tmp_path / "run"
    first = overt_job("train", "digits", "epochs=2", "progress=off", "strategy=fsdp", f"run_dir={run}", "nproc=2")
    assert first.returncode == 0, first.stderr[-3000:]
    # as if the job had died after epoch 1: only the epoch-1 checkpoint (step 23) is left
    shutil.rmtree(run / "checkpoints" / "step-000046")
    for name in ("summary.json", "model.safetensors"):
        (run / name).unlink()
    more = overt_job("resume", str(run), "nproc=3")
    assert more.returncode == 0, more.stderr[-3000:]
    assert "saved by 2 processes and this run has 3" in more.stderr  # RNG: not exact, and said so
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 3 and summary["epochs"] == 2 and summary["final"]["val/accuracy"] > 0.5


@pytest.mark.parametrize("bug,slug", [("unsharded", "unsharded-sampler"), ("no-set-epoch", "unset-epoch"),
                                      ("none", None)])
def test_torchrun_overt_run_reports_every_ranks_findings_once_on_rank_0(tmp_path, bug, slug):
    import json

    report = tmp_path / "report.json"
    script = Path(__file__).parent / "scripts" / "ddp_script.py"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "overt",
                           "run", "--report", str(report), str(script), "--bug", bug],
                          capture_output=True, text=True, env=job_env(), timeout=400, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(report.read_text())["findings"]
    assert not list(tmp_path.glob("report.json.rank*"))  # gathered: only rank 0 wrote a report
    if slug is None:
        assert found == [] and "no findings" in done.stderr
        return
    assert [f["slug"] for f in found] == [slug]
    assert found[0]["details"]["ranks"] == [0, 1]  # both ranks made it; reported once
    assert done.stderr.count(f"{slug} [") <= 2  # rank 0's own line as found + the merged one at the end
