"""Resuming must not change finished work, and must be exact with early stopping and the guards too
(issue 34, items 2, 5 and 9): real digits runs (tests/checkpoint/kill_recipe.py signals itself at a
chosen forward pass; ``OVERT_TEST_NAN_AT`` plants a NaN output at one)."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

import pytest

from tests.conftest import run_overt

RECIPE = str(Path(__file__).with_name("kill_recipe.py"))
PASSES = 45 + 6  # forward passes of one epoch: 45 training micro-batches (15 steps), 6 validation batches
QUIET = ["progress=off", "tensorboard=false", "metrics_csv=false"]
# val/accuracy never improves by more than 10: epoch 1 sets the best, epochs 2 and 3 fail -> stop after 3
EARLY = ["epochs=6", "early_stop=2", "early_stop_min_delta=10", "checkpoint_every_steps=null"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): sha(p) for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def test_resume_of_an_early_stopped_run_finishes_at_once(tmp_path, capsys):
    """Item 2: `overt resume` on a run that stopped early trained three more epochs, wrote new
    weights and summary and rotated the checkpoint of the old final weights out."""
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    run_dir = tmp_path / "run"
    assert train(["digits", f"run_dir={run_dir}", "hidden=16", *EARLY, *QUIET]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 3 and summary["early_stop"]["epoch"] == 3
    before = files(run_dir)
    capsys.readouterr()
    assert resume([str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert "is finished (it stopped early after epoch 3" in err
    assert "resuming from" not in err  # nothing rebuilt, nothing trained
    assert files(run_dir) == before  # no new weights, summary or checkpoint; none rotated out


def test_resume_of_a_completed_run_finishes_at_once(tmp_path, capsys):
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    run_dir = tmp_path / "run"
    assert train(["digits", f"run_dir={run_dir}", "hidden=16", "epochs=1", *QUIET]) == 0
    before = files(run_dir)
    capsys.readouterr()
    assert resume([str(run_dir)]) == 0
    assert "finished" in capsys.readouterr().err
    assert files(run_dir) == before


def test_python_resume_of_an_early_stopped_run_trains_nothing(tmp_path):
    """The same through overt.checkpoint.resume + fit: the restored early-stop state ends the run at once."""
    from overt.checkpoint import resume
    from tests.report.conftest import train_run
    from overt.recipes.digits import load_digits_split

    digits = load_digits_split(0.2, 0)
    first = train_run(tmp_path / "run", digits, epochs=6, checkpoint=True, early_stop=2, early_stop_min_delta=10)
    assert first["epochs"] == 3
    import torch
    from torch import nn

    import overt
    from overt.recipes.digits import DigitsMLP

    model = DigitsMLP(32, 0.1)
    trainer = overt.Trainer(model, torch.optim.AdamW(model.parameters(), lr=3e-3), nn.CrossEntropyLoss(),
                            digits[0], digits[1], epochs=6, metrics={"accuracy": overt.metrics.accuracy},
                            monitor="val/accuracy", monitor_mode="max", early_stop=2, early_stop_min_delta=10,
                            progress="off", tensorboard=False)
    resume(trainer, tmp_path / "run")
    again = trainer.fit()
    assert again["steps"] == first["steps"] and again["epochs"] == 3
    assert again["early_stop"]["epoch"] == 3 and again["best"] == first["best"]


@pytest.mark.slow
def test_kill_after_a_non_improving_epoch_then_resume_stops_where_the_uninterrupted_run_does(tmp_path):
    """Item 5: the patience counter was not in the checkpoint: killed after epoch 2 (one validation
    without improvement) and resumed, the run stopped after epoch 4 instead of 3."""
    reference = run_overt("train", RECIPE, f"run_dir={tmp_path / 'ref'}", *EARLY, *QUIET, timeout=300)
    assert reference.returncode == 0, reference.stderr
    killed = run_overt("train", RECIPE, f"run_dir={tmp_path / 'run'}", *EARLY, *QUIET, timeout=300,
                       OVERT_TEST_SIGNAL_AT=str(2 * PASSES + 1))  # SIGKILL at the first forward of epoch 3
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = run_overt("resume", str(tmp_path / "run"), timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stderr
    want = json.loads((tmp_path / "ref" / "summary.json").read_text())
    got = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert got["early_stop"] == want["early_stop"] and got["early_stop"]["epoch"] == 3
    assert (got["epochs"], got["steps"], got["best"]) == (want["epochs"], want["steps"], want["best"])
    assert sha(tmp_path / "run" / "model.safetensors") == sha(tmp_path / "ref" / "model.safetensors")


def test_sigterm_mid_epoch_keeps_the_patience_count(tmp_path, monkeypatch):
    """Item 5 in one process: stopped by SIGTERM in epoch 3 (after a non-improving epoch 2), the
    resumed run stops after epoch 3, as the uninterrupted one."""
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    assert train([RECIPE, f"run_dir={tmp_path / 'ref'}", *EARLY, *QUIET]) == 0
    monkeypatch.setenv("OVERT_TEST_SIGNAL", "SIGTERM")
    monkeypatch.setenv("OVERT_TEST_SIGNAL_AT", str(2 * PASSES + 10))
    assert train([RECIPE, f"run_dir={tmp_path / 'run'}", *EARLY, *QUIET]) == 143
    monkeypatch.delenv("OVERT_TEST_SIGNAL_AT")
    assert resume([str(tmp_path / "run")]) == 0
    got = json.loads((tmp_path / "run" / "summary.json").read_text())
    want = json.loads((tmp_path / "ref" / "summary.json").read_text())
    assert got["epochs"] == 3 and got["early_stop"]["epoch"] == 3 and got["early_stop"]["best_epoch"] == 1
    assert got["early_stop"] == want["early_stop"] and got["best"] == want["best"]


def test_guard_findings_after_a_resume_carry_the_runs_step(tmp_path, monkeypatch):
    """Item 9: a finding after a resume carried a step counted from the resume (180 where the
    run's step was 480).  A NaN planted at the same position, once in an uninterrupted run and once
    after a stop and resume, is reported at the same step."""
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    nan_at = PASSES + 29  # epoch 2, micro-batch 29 (forward passes counted from the recipe's import)
    args = ["epochs=2", "log_every=5", *QUIET]
    monkeypatch.setenv("OVERT_TEST_NAN_AT", str(nan_at))
    assert train([RECIPE, f"run_dir={tmp_path / 'ref'}", *args]) == 2  # the guards stop it
    stop_at = PASSES + 9  # SIGTERM: stops after micro-batch 9 of epoch 2 (step 18)
    monkeypatch.setenv("OVERT_TEST_NAN_AT", "0")
    monkeypatch.setenv("OVERT_TEST_SIGNAL", "SIGTERM")
    monkeypatch.setenv("OVERT_TEST_SIGNAL_AT", str(stop_at))
    assert train([RECIPE, f"run_dir={tmp_path / 'run'}", *args]) == 143
    monkeypatch.delenv("OVERT_TEST_SIGNAL_AT")
    monkeypatch.setenv("OVERT_TEST_NAN_AT", str(nan_at - stop_at))
    assert resume([str(tmp_path / "run")]) == 2

    def steps(run_dir: Path) -> list[tuple[str, int]]:
        found = json.loads((run_dir / "guards.json").read_text())["findings"]
        return [(f["slug"], f["step"]) for f in found if f["slug"] == "non-finite"]

    want = steps(tmp_path / "ref")
    assert want and want[0][1] > 18
    assert steps(tmp_path / "run") == want


def test_a_check_right_after_a_resume_names_the_runs_step(tmp_path, monkeypatch):
    """The checks that record the step themselves (the gradient check of the warm-up, which starts
    again after a resume) report the run's step too, in the finding and in its message."""
    from overt.cli.resume import main as resume
    from overt.cli.train import main as train

    monkeypatch.setenv("OVERT_TEST_SIGNAL", "SIGTERM")
    monkeypatch.setenv("OVERT_TEST_SIGNAL_AT", str(PASSES + 9))  # stops after step 18
    assert train([RECIPE, f"run_dir={tmp_path / 'run'}", "epochs=2", *QUIET]) == 143
    monkeypatch.delenv("OVERT_TEST_SIGNAL_AT")
    monkeypatch.setenv("OVERT_TEST_NAN_AT", "2")  # in the first step after the resume, a checked one
    assert resume([str(tmp_path / "run")]) == 2
    found = json.loads((tmp_path / "run" / "guards.json").read_text())["findings"]
    (nan,) = [f for f in found if f["slug"] == "non-finite"]
    assert 18 <= nan["step"] <= 21, nan
    assert f"at step {nan['step']}" in nan["message"]
