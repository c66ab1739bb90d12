"""The run directory: one process at a time (an OS lock that dies with its process), unique
default names, and messages that say how to go on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overt.errors import ConfigError
from overt.run.rundir import claim
from tests.conftest import REPO

def test_two_runs_with_default_names_in_the_same_second_do_not_collide(tmp_path):
    first = claim(tmp_path / "digits-20260101-120000", unique=True)
    second = claim(tmp_path / "digits-20260101-120000", unique=True)
    assert first.path.name == "digits-20260101-120000" and second.path.name == "digits-20260101-120000-2"
    assert first.held and second.held
    first.lock().release()
    second.lock().release()


def test_a_second_process_is_refused_at_once_and_a_killed_holder_leaves_no_stale_lock(tmp_path, capsys):
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    run_dir = tmp_path / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=1", "progress=off", "tensorboard=false"]) == 0
    # another process takes the run (as `overt resume` does first) and is then stopped, holding it
    code = ("import os, signal, sys; from overt.run.rundir import RunDir; RunDir(sys.argv[1]).lock().acquire(); "
            "os.kill(os.getpid(), signal.SIGSTOP)")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    holder = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], env=env)
    try:
        deadline = time.monotonic() + 60
        while Path(f"/proc/{holder.pid}/stat").read_text().split()[2] != "T" and time.monotonic() < deadline:
            time.sleep(0.02)
        # refused at once: waiting for the lock would hang here (its holder is stopped for good)
        assert resume([str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert f"is in use by another overt process (pid {holder.pid} on host" in err and "running since" in err
        assert train(["digits", f"run_dir={run_dir}"]) == 2
        assert f"pid {holder.pid}" in capsys.readouterr().err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    # the kernel released the lock with the process: no stale lock
    assert resume([str(run_dir), "progress=off"]) == 0
    err = capsys.readouterr().err
    assert "in use" not in err and "is finished" in err  # taken, then left as it is: the run had finished


def test_a_killed_run_says_how_to_go_on(tmp_path, capsys):
    """`running` in status.json while nobody holds the lock: the run ended abruptly.  With a
    checkpoint, `overt train` points to `overt resume`; without one, both say how to start again."""
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("recipe: digits\n")
    (run_dir / "status.json").write_text('{"status": "running"}')
    (run_dir / ".lock").write_text("")  # what a killed run leaves behind (overt's marker; unlocked)
    assert train(["digits", f"run_dir={run_dir}"]) == 2
    err = capsys.readouterr().err
    assert "a run that ended abruptly" in err and f"rm -r {run_dir}" in err and "overt resume" not in err
    assert resume([str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "has no checkpoint to continue from" in err and f"rm -r {run_dir}" in err
    (run_dir / "checkpoints" / "step-000004").mkdir(parents=True)
    assert train(["digits", f"run_dir={run_dir}"]) == 2
    assert f"overt resume {run_dir}" in capsys.readouterr().err
