"""The staples framework users expect, in the engine: early stopping and metrics.csv -- each on
real digits / tiny runs (W&B: tests/integrations/test_wandb.py; overt sweep: tests/cli/test_sweep.py)."""

from __future__ import annotations

import csv
import json

import pytest

from overt.run.reader import read_metrics
from tests.report.conftest import train_recipe


def test_early_stop_stops_after_patience_validations_without_improvement(tmp_path, capsys):
    # min_delta larger than any possible change: only the first validation counts as an improvement
    summary = train_recipe(tmp_path / "run", "epochs=6", "early_stop=2", "early_stop_min_delta=10")
    assert summary["epochs"] == 3  # epoch 1 sets the best, epochs 2 and 3 fail to beat it
    assert summary["status"] == "completed"
    assert summary["early_stop"]["epoch"] == 3 and summary["early_stop"]["best_epoch"] == 1
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "completed"
    err = capsys.readouterr().err
    assert "early stop after epoch 3" in err
    # the value compared against, named as such (a later, smaller gain may be the run's best)
    best = summary["early_stop"]["best"]
    assert f"(last improvement by more than 10: {best:.6g} at epoch 1)" in err


def test_early_stop_lets_an_improving_run_finish(tmp_path):
    summary = train_recipe(tmp_path / "run", "epochs=3", "early_stop=1")
    assert summary["epochs"] == 3 and "early_stop" not in summary


def test_early_stop_setting_is_checked():
    from overt.errors import ConfigError
    from tests.report.conftest import train_recipe as run

    with pytest.raises(ConfigError):
        run("unused", "early_stop=0")


def test_metrics_csv_has_every_record_of_metrics_jsonl(tmp_path):
    train_recipe(tmp_path / "run")
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    with open(tmp_path / "run" / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(records) > 2
    for row, record in zip(rows, records):
        expected = {k: float(v) for k, v in record.items()}
        assert {k: float(v) for k, v in row.items() if v != ""} == pytest.approx(expected)


def test_metrics_csv_false_writes_no_table(tmp_path):
    train_recipe(tmp_path / "run", "metrics_csv=false")
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_an_early_stopped_run_keeps_its_best_epoch_checkpoint(tmp_path):
    """What `overt predict/export --checkpoint best` relies on: the best epoch's checkpoint, with
    its metric in the manifest, survives the early stop and the keep-last pruning."""
    from overt.checkpoint.store import list_checkpoints

    summary = train_recipe(tmp_path / "run", "epochs=8", "early_stop=2", "early_stop_min_delta=10",
                           "checkpoint=true", "keep_last=1", "keep_best=1", "checkpoint_background=false")
    entries = list_checkpoints(tmp_path / "run" / "checkpoints")
    best = summary["best"]
    scored = [e for e in entries if e.metric is not None]
    assert any(e.step == best["step"] and e.metric == pytest.approx(best["value"]) for e in scored)
    assert max(e.step for e in entries) == summary["steps"]  # the last one too
