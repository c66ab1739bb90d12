"""How a whole ``overt train ... nproc=2`` job ends when its processes are signalled the way
schedulers, the OOM killer and CI do it (slow: each starts torchrun's agent and two workers).

- SIGTERM to every process at once (SLURM, a container runtime): each worker gets it directly
  and forwarded by the launcher; the job saves one stop checkpoint, exits 143 with status
  ``stopped``, and the resumed run is bit-identical to an uninterrupted one;
- a worker SIGKILLed (the OOM killer) beside a SIGTERMed peer: exit 1, not 143;
- SIGKILL of the launcher's process group (a CI cancel, ``timeout -s KILL``): no worker survives
  it, the run directory is not left locked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist

from tests.distributed.jobs import ARGS, job_env, overt_job, start_job, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available()
                                 or not sys.platform.startswith("linux"),
                                 reason="needs gloo and Linux (/proc)")]


def workers(launcher: int) -> dict[int, int]:
    """``rank -> pid`` of the launcher's worker processes."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) != launcher:
                continue
            env = dict(item.split("=", 1) for item in Path(f"/proc/{entry}/environ").read_text().split("\0")
                       if "=" in item)
        except (OSError, ValueError):
            continue
        if "RANK" in env:
            out[int(env["RANK"])] = int(entry)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_sigterm_to_every_process_at_once_saves_once_exits_143_and_resumes_bit_identically(tmp_path):
    plain = tmp_path / "plain"
    done = overt_job("train", *ARGS, f"run_dir={plain}", "nproc=2")
    assert done.returncode == 0, done.stderr[-3000:]

    run = tmp_path / "run"
    proc = start_job("train", *ARGS, f"run_dir={run}", "nproc=2")
    wait_for(run / "checkpoints" / "step-000010" / "manifest.json", proc)
    ranks = workers(proc.pid)
    assert len(ranks) == 2
    for pid in ranks.values():  # as `scancel` does: every process of the job step...
        os.kill(pid, signal.SIGTERM)
    time.sleep(0.05)  # (not coalesced with the first delivery: a second, separate SIGTERM)
    os.kill(proc.pid, signal.SIGTERM)  # ...the launcher too, which forwards it to every worker
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err[-3000:]
    assert err.count("stopped on SIGTERM") == 1 and "Traceback" not in err, err[-3000:]
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "stopped", status
    summary = json.loads((run / "summary.json").read_text())
    assert summary["preempted"]["signal"] == "SIGTERM"
    stop = Path(summary["preempted"]["checkpoint"])
    assert stop.is_dir() and summary["checkpoint"]["saved"] >= 1

    finished = overt_job("resume", str(run), "nproc=2")
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"resuming from {stop}" in finished.stderr
    assert (run / "model.safetensors").read_bytes() == (plain / "model.safetensors").read_bytes()


def test_a_sigkilled_worker_beside_a_sigtermed_peer_fails_the_job(tmp_path):
    run = tmp_path / "run"
    proc = start_job("train", *ARGS, f"run_dir={run}", "nproc=2")
    wait_for(run / "checkpoints" / "step-000005" / "manifest.json", proc)
    ranks = workers(proc.pid)
    os.kill(ranks[1], signal.SIGKILL)  # the OOM killer
    os.kill(ranks[0], signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    assert "rank 1: killed by SIGKILL" in err


def test_sigkill_of_the_launchers_process_group_leaves_no_worker_running(tmp_path):
    run = tmp_path / "run"
    args = [a for a in ARGS if not a.startswith("epochs=")]
    proc = subprocess.Popen([sys.executable, "-m", "overt", "train", *args, "epochs=500", f"run_dir={run}",
                             "nproc=2"], env=job_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for(run / "checkpoints" / "step-000005" / "manifest.json", proc)
    ranks = workers(proc.pid)
    assert len(ranks) == 2
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher's process group: the workers are not in it
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60  # the kernel kills them at once; allow for a loaded machine
    while any(alive(p) for p in ranks.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = [p for p in ranks.values() if alive(p)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert not survivors, "workers outlived their SIGKILLed launcher"
    from overt.run import lock

    assert lock.holder(run) is None
    assert not (run / "summary.json").exists()  # ended by the kill, not by training to the end
    again = overt_job("resume", str(run), "nproc=2", "epochs=2")  # the run directory is free: resume continues it
    assert again.returncode == 0, again.stderr[-3000:]


def test_a_usage_error_of_a_two_process_resume_exits_2_as_documented(tmp_path):
    done = overt_job("resume", str(tmp_path / "no-such-run"), "nproc=2")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
