"""Running ``overt`` commands as whole jobs (launcher and workers) for the CLI tests of this folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

ARGS = ["digits", "epochs=12", "checkpoint_every_steps=5", "log_every=2", "progress=off", "checkpoint_background=false"]


def job_env():
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def overt_job(*args, timeout=400):
    return subprocess.run([sys.executable, "-m", "overt", *args], capture_output=True, text=True, env=job_env(),
                          timeout=timeout, cwd=REPO)


def start_job(*args):
    return subprocess.Popen([sys.executable, "-m", "overt", *args], env=job_env(), cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc, limit=300):
    start = time.time()
    while not path.exists():
        assert proc.poll() is None, proc.communicate(timeout=60)[1][-3000:]
        assert time.time() - start < limit, f"{path} never appeared"
        time.sleep(0.01)
