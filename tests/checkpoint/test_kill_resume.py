"""Kill real `overt train` processes and resume them: the final weights must be bit-identical.

The runs use tests/checkpoint/kill_recipe.py: digits with dropout, shuffling, accumulation over
3 micro-batches, a per-step OneCycle schedule and clipping, a checkpoint every 4 optimizer steps,
written in the background.  The process signals itself at a chosen forward pass (a real signal).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_overt

RECIPE = str(Path(__file__).with_name("kill_recipe.py"))
FORWARD_PASSES = 3 * (45 + 6)  # 3 epochs x (45 training micro-batches + 6 validation batches)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train(run_dir: Path, *extra: str, **env: str):
    return run_overt("train", RECIPE, f"run_dir={run_dir}", *extra, **env)


def metrics(run_dir: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock throughput."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "train/samples_per_sec"} for r in records]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    done = train(run_dir)
    assert done.returncode == 0, done.stderr
    return run_dir


@pytest.fixture(scope="module")
def reference(reference_run) -> str:
    """SHA-256 of the final weights of the uninterrupted run."""
    return sha(reference_run / "model.safetensors")


def test_sigkill_at_a_random_step_then_resume_is_bit_identical(tmp_path, reference, reference_run):
    workers = 2  # the harder case; scripts/kill_resume_tally.py repeats this for many points and both
    at = random.Random().randint(20, FORWARD_PASSES)  # after the first checkpoint (12 micro-batches)
    run_dir = tmp_path / "run"
    killed = train(run_dir, f"num_workers={workers}", OVERT_TEST_SIGNAL_AT=str(at))
    assert killed.returncode == -signal.SIGKILL, f"kill point {at}: {killed.stderr}"
    assert not (run_dir / "model.safetensors").exists()
    resumed = run_overt("resume", str(run_dir))
    assert resumed.returncode == 0, f"kill point {at}: {resumed.stderr}"
    assert "resuming from" in resumed.stderr
    assert sha(run_dir / "model.safetensors") == reference, f"kill point {at}: weights differ"
    # the log holds each step once (the recomputed ones were dropped, then logged again), same values
    assert metrics(run_dir) == metrics(reference_run), f"kill point {at}"


def test_kill_during_a_save_and_a_truncated_newest_fall_back_to_the_previous(tmp_path, reference):
    run_dir = tmp_path / "run"
    # saves: steps 4, 8, 12, 15 (end of epoch 1), 16...; SIGKILL inside the 5th save (step 16),
    # after its model file and before its manifest
    killed = train(run_dir, "checkpoint_background=false", OVERT_TEST_KILL_IN_SAVE="18")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ckpts = run_dir / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir() if not p.name.startswith(".")) == [
        "step-000008", "step-000012", "step-000015"]
    assert [p.name for p in ckpts.iterdir() if p.name.startswith(".tmp-step-000016")]  # the unfinished save
    # and the newest finished one is then cut short, as by a full disk
    weights = ckpts / "step-000015" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    resumed = run_overt("resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert "step-000015 is unusable: step-000015: model.safetensors has 1000 bytes" in resumed.stderr
    assert ".tmp-step-000016" in resumed.stderr and "never finished" in resumed.stderr
    assert "resuming from" in resumed.stderr and "step-000012" in resumed.stderr
    assert (ckpts / "step-000015.bad").is_dir()  # moved aside, named
    assert not [p for p in ckpts.iterdir() if p.name.startswith(".tmp-")]  # cleaned at the next save
    assert sha(run_dir / "model.safetensors") == reference


def test_sigterm_finishes_the_step_saves_exits_143_and_resume_is_exact(tmp_path, reference):
    run_dir = tmp_path / "run"
    # forward pass 65 = epoch 2's 14th micro-batch (after 45 + 6 passes of epoch 1): inside window 5
    stopped = train(run_dir, OVERT_TEST_SIGNAL_AT="65", OVERT_TEST_SIGNAL="SIGTERM")
    assert stopped.returncode == 143, stopped.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["steps"] == 20  # 15 + the 5 windows of epoch 2
    assert summary["preempted"] == {"signal": "SIGTERM", "exit_code": 143, "checkpoint": summary["checkpoint"]["last"]}
    last = Path(summary["checkpoint"]["last"])
    assert last.name == "step-000020"
    state = json.loads((last / "state.json").read_text())
    assert state["meta"]["kind"] == "stop"
    assert state["meta"]["epoch"] == 1 and state["meta"]["batch_index"] == 15  # the window was finished
    assert "stopped on SIGTERM" in stopped.stderr and f"overt resume {run_dir}" in stopped.stderr
    resumed = run_overt("resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    assert sha(run_dir / "model.safetensors") == reference


def test_the_same_sigterm_delivered_twice_at_once_is_one_clean_stop(tmp_path):
    run_dir = tmp_path / "run"
    done = train(run_dir, OVERT_TEST_SIGNAL_AT="65", OVERT_TEST_SIGNAL="SIGTERM", OVERT_TEST_SIGNAL_TWICE="0")
    assert done.returncode == 143, done.stderr
    assert json.loads((run_dir / "status.json").read_text())["status"] == "stopped"


def test_a_sigterm_while_the_finished_run_writes_its_weights_lets_it_complete(tmp_path):
    """After the last step the run only writes its final files and exits: a preemption landing then
    is ignored (it used to kill the process between model.safetensors and summary.json, -15)."""
    run_dir = tmp_path / "run"
    done = train(run_dir, OVERT_TEST_SIGNAL_AT_FINAL_WEIGHTS="1", OVERT_TEST_SIGNAL="SIGTERM")
    assert done.returncode == 0, done.stderr
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    assert (run_dir / "model.safetensors").is_file()


def test_a_second_sigterm_after_the_grace_period_exits_at_once(tmp_path):
    run_dir = tmp_path / "run"
    done = train(run_dir, OVERT_TEST_SIGNAL_AT="65", OVERT_TEST_SIGNAL="SIGTERM", OVERT_TEST_SIGNAL_TWICE="2.5")
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert not (run_dir / "summary.json").exists()
    status = json.loads((run_dir / "status.json").read_text())  # not left saying "running"
    assert status["status"] == "killed" and "a second SIGTERM" in status["error"]


def _sigterm_the_process_group(run_dir: Path, delay: float) -> subprocess.CompletedProcess:
    """`overt train` with 2 DataLoader workers in its own session; SIGTERM to the whole process
    group (as SLURM, Kubernetes and systemd preempt) ``delay`` seconds after training started."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "overt", "train", RECIPE, f"run_dir={run_dir}", "num_workers=2"],
                            cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # only a guard against a hang
    while not (run_dir / "metrics.jsonl").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # metrics.jsonl appears at the start of fit, after the signal handlers
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _process_group_trial(run_dir: Path, delay: float, reference: str) -> None:
    stopped = _sigterm_the_process_group(run_dir, delay)
    if stopped.returncode == 0:  # the run finished before the signal: nothing was tested
        pytest.skip("the run ended before the signal")
    assert stopped.returncode == 143, f"delay {delay}: {stopped.stderr}"
    assert "Traceback" not in stopped.stderr and "Exception ignored" not in stopped.stderr, stopped.stderr
    assert "stopped on SIGTERM" in stopped.stderr
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
    resumed = run_overt("resume", str(run_dir), "num_workers=2")
    assert resumed.returncode == 0, f"delay {delay}: {resumed.stderr}"
    assert sha(run_dir / "model.safetensors") == reference, f"delay {delay}: weights differ"


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(10))
def test_sigterm_to_the_process_group_with_workers_saves_and_resumes_exactly(tmp_path, reference, trial):
    """10 of 10 (about 30 s each on 2 busy cores; the default suite checks the mechanism in
    tests/engine/test_bad_input.py::test_loader_workers_never_see_preemption_signals)."""
    _process_group_trial(tmp_path / "run", random.Random(trial).uniform(0.0, 1.2), reference)
