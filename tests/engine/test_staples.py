"""The staples framework users expect, in the engine: early stopping, metrics.csv, W&B (offline)
and ``overt sweep`` -- each on real digits / tiny runs."""

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
    assert "early stop after epoch 3" in capsys.readouterr().err


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


def test_wandb_offline_logs_the_run_without_network(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    summary = train_recipe(tmp_path / "run", "wandb_mode=offline", "wandb_project=overt-test")
    assert summary["status"] == "completed"
    (events,) = list((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    data = events.read_bytes()
    for key in (b"val/accuracy", b"train/loss", b"overt/findings", b"overt-test"):
        assert key in data


def test_sweep_trains_every_combination_and_compares_them(tmp_path, capsys):
    from overt.cli.sweep import main

    code = main(["tiny", "lr=0.1,0.001", "epochs=2", "progress=off", "checkpoint=false", "tensorboard=false",
                 f"sweep_dir={tmp_path / 'sw'}"])
    assert code == 0
    result = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [r["overrides"] for r in result["runs"]] == [{"lr": "0.1"}, {"lr": "0.001"}]  # best first
    values = [r["best"]["value"] for r in result["runs"]]
    assert values == sorted(values, reverse=result["mode"] == "max")
    assert (tmp_path / "sw" / "report" / "report.md").is_file()
    assert (tmp_path / "sw" / "lr=0.1" / "summary.json").is_file()
    assert "| 1 | lr=0.1 |" in capsys.readouterr().out


def test_sweep_checks_every_configuration_before_training(tmp_path, capsys):
    from overt.cli import main

    code = main(["train", "-m", "tiny", "lr=0.1,0.01", "epohcs=2", f"sweep_dir={tmp_path / 'sw'}"])
    assert code == 2
    assert "epohcs" in capsys.readouterr().err
    assert not (tmp_path / "sw").exists()


def test_sweep_dir_naming_a_file_is_a_clear_error(tmp_path, capsys):
    from overt.cli import main

    (tmp_path / "file").write_text("x")
    assert main(["sweep", "tiny", "lr=0.1,0.01", f"sweep_dir={tmp_path / 'file'}"]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "Traceback" not in err


def test_sweep_grid_keeps_bracketed_values_whole():
    from overt.cli.sweep_grid import grid

    fixed, combos = grid(["a=1,2", "ignore=[graph-leak,dead-activations]", "b=x,y", "c=3"])
    assert fixed == ["ignore=[graph-leak,dead-activations]", "c=3"]
    assert combos == [{"a": "1", "b": "x"}, {"a": "1", "b": "y"}, {"a": "2", "b": "x"}, {"a": "2", "b": "y"}]


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
