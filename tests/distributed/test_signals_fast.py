"""Fast checks of the stop machinery in real processes (no training): a preemption signal delivered
twice at once is one request; a repeat after the grace period ends the process; a worker dies with
its agent; the job's exit code is 128 + N only when every worker stopped cleanly on N."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from overt.distributed.launch import describe_exit, exit_code_of
from tests.conftest import REPO

_HANDLER = """
import os, signal, sys, time
from overt.checkpoint.preempt import PreemptionHandler
got = []
h = PreemptionHandler([signal.SIGTERM, signal.SIGINT], got.append)
h.grace_s = float(sys.argv[1])
h.install()
os.kill(os.getpid(), signal.SIGTERM)   # e.g. from the scheduler
os.kill(os.getpid(), signal.SIGTERM)   # the same request, forwarded by torchrun's agent
time.sleep(0.05)
print("requests", len(got), "repeats", h.repeats, flush=True)
if sys.argv[2] == "late":
    time.sleep(float(sys.argv[1]) + 0.05)
    os.kill(os.getpid(), signal.SIGINT)    # a new request after the grace period: ends the process
    time.sleep(5)
    print("still alive", flush=True)
"""


def _python(code: str, *args: str, **kw):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=120, **kw)


def test_the_same_signal_delivered_twice_at_once_is_one_request():
    done = _python(_HANDLER, "2.0", "once")
    assert done.returncode == 0, done.stderr
    assert "requests 1 repeats 1" in done.stdout


def test_a_repeat_after_the_grace_period_ends_the_process_at_once():
    done = _python(_HANDLER, "0.1", "late")
    assert "requests 1 repeats 1" in done.stdout
    assert done.returncode == -signal.SIGINT and "still alive" not in done.stdout


_PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import time; from overt.distributed.launch import die_with_agent; die_with_agent(); "
    "print('ready', flush=True); time.sleep(120)"],
    env={**os.environ, "TORCHELASTIC_RUN_ID": "test", "OVERT_LAUNCHER_PID": str(os.getpid())},
    stdout=subprocess.PIPE, text=True, start_new_session=True)
assert child.stdout.readline().strip() == "ready"
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_a_worker_dies_with_its_sigkilled_agent():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    worker = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=60)
    for _ in range(600):  # the kernel signals the worker when its parent dies; wait for it to be gone
        try:
            with open(f"/proc/{worker}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # dead, waiting for init to reap it
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its SIGKILLed parent")


@pytest.mark.parametrize("failures, nproc, code", [
    ({0: 143, 1: 143}, 2, 143),            # a clean stop every rank agreed on
    ({0: 130, 1: 130}, 2, 130),
    ({0: 143, 1: -9}, 2, 1),               # the OOM killer's SIGKILL beside a clean stop
    ({0: -15, 1: -9}, 2, 1),               # SIGTERM death beside SIGKILL: not a preemption
    ({0: 143, 1: -6}, 2, 1),               # SIGABRT at teardown
    ({0: 143, 1: -15}, 2, 1),              # a worker ended by SIGTERM, not stopped by it
    ({0: -15, 1: -15}, 2, 1),
    ({0: 143}, 2, 1),                      # one rank stopped, the other finished: they disagreed
    ({0: 143, 1: 130}, 2, 1),
    ({0: 2, 1: 2}, 2, 2),                  # a usage error on every rank
    ({0: 2, 1: -15}, 2, 2),                # ... and torchrun's agent ended the other rank
    ({0: 1, 1: -15}, 2, 1),
    ({0: 2, 1: 1}, 2, 1),
])
def test_the_jobs_exit_code(failures, nproc, code):
    assert exit_code_of(failures, nproc) == code


def test_exit_codes_are_described():
    assert describe_exit(-9) == "killed by SIGKILL (the OOM killer sends it)"
    assert describe_exit(143) == "exit code 143 (stopped cleanly on SIGTERM)"
    assert describe_exit(1) == "exit code 1"


def test_a_collective_failing_because_a_peer_died_is_told_apart(monkeypatch):
    from overt.distributed.launch import peer_gone

    error = RuntimeError("[pair.cc:537] Read error [127.0.0.1]:30393: Connection reset by peer")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert peer_gone(error) and not peer_gone(RuntimeError("size mismatch"))
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not peer_gone(error)
