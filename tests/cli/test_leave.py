"""A torchrun worker that overt owns ends with ``os._exit`` after doing what Python's exit does
(issue 34, item 15): nothing of the script is lost, and nothing of overt's own process leaks into a
user's process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from overt.cli.leave import owns_a_torchrun_worker
from overt.command import exit_status
from tests.conftest import REPO

#: a script that leaves work for the interpreter's exit: a buffered file never closed, an atexit
#: handler, a thread pool's task still running, a plain non-daemon thread, output without a newline,
#: and an object whose ``__del__`` only the interpreter's finalisation would call
SCRIPT = textwrap.dedent("""
    import atexit, concurrent.futures, sys, threading, time
    import torch.distributed  # what makes the worker's exit overt's to take over

    out = sys.argv[1]
    log = open(out + "/unclosed.txt", "w")
    log.write("buffered, never closed")
    atexit.register(lambda: open(out + "/atexit.txt", "w").write("atexit ran"))
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.submit(lambda: (time.sleep(0.5), open(out + "/pool.txt", "w").write("pool task done")))
    threading.Thread(target=lambda: (time.sleep(0.5), open(out + "/thread.txt", "w").write("thread done"))).start()

    class Finalised:
        def __del__(self):
            print("finalised", flush=True)

    kept = Finalised()
    print("no newline at the end", end="")
    sys.exit(7)
""")


@pytest.mark.parametrize("world_size,left", [("2", True), ("1", False)])
def test_a_torchrun_worker_of_overt_run_loses_nothing_and_skips_only_the_finalisation(tmp_path, world_size, left):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "WORLD_SIZE": world_size, "RANK": "0",
           "LOCAL_RANK": "0"}
    done = subprocess.run([sys.executable, "-m", "overt", "run", str(script), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert (tmp_path / "unclosed.txt").read_text() == "buffered, never closed"
    assert (tmp_path / "atexit.txt").read_text() == "atexit ran"
    assert (tmp_path / "pool.txt").read_text() == "pool task done"
    assert (tmp_path / "thread.txt").read_text() == "thread done"
    assert done.stdout.startswith("no newline at the end")
    # the interpreter's finalisation (the only place a C++ thread of torch.distributed can abort the
    # process) runs in a single process, never in a worker overt owns
    assert ("finalised" in done.stdout) is not left


OWNED = [({"WORLD_SIZE": "2", "RANK": "1"}, True), ({"WORLD_SIZE": "1"}, False), ({}, False),
         ({"WORLD_SIZE": "two"}, False)]


@pytest.mark.parametrize("environ,owned", OWNED)
def test_only_a_worker_of_a_multi_process_job_that_loaded_torch_distributed_is_taken_over(monkeypatch, environ, owned):
    import torch.distributed  # noqa: F401  (loaded, as in any worker that trains)

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert owns_a_torchrun_worker() is owned


def test_in_process_calls_return_their_code():
    from overt.cli import main

    assert main(["--version"]) == 0  # argv given: a caller's own process, never ended by overt


@pytest.mark.parametrize("code,status", [(None, 0), (3, 3), ("a message", 1)])
def test_exit_status_is_what_sys_exit_gives(code, status, capsys):
    assert exit_status(SystemExit(code)) == status
    assert ("a message" in capsys.readouterr().err) is (code == "a message")
