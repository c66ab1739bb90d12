"""MLflow tracking against a real local MLflow store (sqlite), read back with the MLflow client."""

from __future__ import annotations

import json

import pytest

from overt.run.reader import read_config, read_metrics
from tests.conftest import REPO, correctness_findings
from tests.report.conftest import train_recipe, train_run

mlflow = pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (creating its tables takes seconds)."""
    folder = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)  # MLflow's default artifact root lands here
        yield f"sqlite:///{folder / 'mlflow.db'}"


def history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_params_metrics_tags_and_artifacts_read_back_equal_the_run_directory(tmp_path, store):
    run_dir = tmp_path / "run"
    summary = train_recipe(run_dir, f"mlflow_uri={store}", "mlflow_experiment=digits-test", "lr=0.01",
                           "clip_grad_norm=1.0")
    client = mlflow.MlflowClient(store)
    run_id = json.loads((run_dir / "mlflow.json").read_text())["run_id"]
    run = client.get_run(run_id)
    assert client.get_experiment(run.info.experiment_id).name == "digits-test"
    assert run.info.status == "FINISHED" and run.info.run_name == "run"

    config = read_config(run_dir / "config.yaml")
    assert run.data.params == {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    assert run.data.params["lr"] == "0.01"

    records = read_metrics(run_dir / "metrics.jsonl")
    keys = {k for r in records for k in r if k != "step"}
    assert {"train/loss", "train/grad_norm", "val/accuracy", "epoch"} <= keys
    assert set(run.data.metrics) == keys
    for key in keys:
        assert history(client, run_id, key) == sorted((r["step"], r[key]) for r in records if key in r), key

    import torch

    tags = run.data.tags
    assert tags["overt.version"] == summary["versions"]["overt"] and tags["torch.version"] == torch.__version__
    assert (tags["overt.device"], tags["overt.precision"]) == ("cpu", "fp32")
    # the count of the run's findings; a busy machine may add dataloader-starvation (TIMING), nothing else
    assert (tags["overt.status"], tags["overt.findings"]) == ("completed", str(len(summary["findings"])))
    assert correctness_findings(summary["findings"]) == []

    artifacts = {a.path for a in client.list_artifacts(run_id, "overt")}
    assert artifacts == {"overt/summary.json", "overt/guards.json", "overt/config.yaml", "overt/model.safetensors"}
    local = client.download_artifacts(run_id, "overt", str(tmp_path / "down"))
    logged = json.loads((tmp_path / "down" / "overt" / "summary.json").read_text())
    assert logged["best"] == summary["best"] and logged["final"] == summary["final"]
    assert logged["mlflow"] == summary["mlflow"] == {"tracking_uri": store, "run_id": run_id}
    from safetensors.torch import load_file

    weights, final = load_file(f"{local}/model.safetensors"), load_file(run_dir / "model.safetensors")
    assert weights.keys() == final.keys() and all(torch.equal(weights[k], final[k]) for k in final)


def test_a_failed_run_is_marked_failed_with_its_error(tmp_path, store, digits):
    def forward(model, batch):
        raise RuntimeError("the data loader returned garbage")

    with pytest.raises(Exception, match="garbage"):
        train_run(tmp_path / "run", digits, forward=forward, mlflow=True, mlflow_uri=store)
    client = mlflow.MlflowClient(store)
    run_id = json.loads((tmp_path / "run" / "mlflow.json").read_text())["run_id"]
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and "garbage" in run.data.tags["overt.error"]
    assert client.get_experiment(run.info.experiment_id).name == "overt"


def test_an_unusable_store_is_an_error_before_anything_is_trained(tmp_path):
    from overt.errors import OvertError

    (tmp_path / "a-file").write_text("not a folder")
    uri = f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"
    with pytest.raises(OvertError, match="cannot use the MLflow tracking store sqlite:///"):
        train_recipe(tmp_path / "run", f"mlflow_uri={uri}")
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_nothing_of_mlflow_or_matplotlib_is_imported_when_off():
    import subprocess
    import sys

    code = ("import sys; from overt.config import TrainConfig; from overt.compose import default_callbacks; "
            "from pathlib import Path; default_callbacks(TrainConfig(progress='plain'), Path('unused')); "
            "print(sorted(m for m in ('mlflow', 'matplotlib', 'overt.integrations.mlflow', 'overt.report') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_new_store_is_opened_quietly_and_the_run_says_where_it_writes(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root (mlruns/) lands here
    store = f"sqlite:///{tmp_path / 'new.db'}"  # a new store: MLflow creates its tables (and says so at INFO)
    import logging

    levels = {name: logging.getLogger(name).level for name in ("mlflow", "alembic")}
    train_recipe(tmp_path / "run", f"mlflow_uri={store}", "epochs=1")
    err = capfd.readouterr().err
    assert " INFO " not in err
    assert {name: logging.getLogger(name).level for name in levels} == levels  # quiet only during overt's calls
    assert f"in {store} (artifacts: " in err and "mlruns" in err


def test_points_are_sent_in_batches_not_one_call_per_log_point(tmp_path, store, monkeypatch):
    """Every metrics.jsonl point reaches MLflow, in at most one log_batch call per SEND_EVERY_S
    seconds of training plus the final one (a call per log point was one sqlite commit each)."""
    import time

    from overt.integrations import mlflow as integration

    calls = []
    real = mlflow.MlflowClient.log_batch

    def counting(self, run_id, metrics=(), *args, **kwargs):
        if metrics:
            calls.append(len(metrics))
        return real(self, run_id, metrics, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "log_batch", counting)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    train_recipe(run_dir, f"mlflow_uri={store}", "epochs=3", "log_every=1")
    elapsed = time.monotonic() - started
    records = read_metrics(run_dir / "metrics.jsonl")
    points = sum(sum(1 for k in r if k != "step") for r in records)
    assert len(records) > 100 and sum(calls) == points
    assert len(calls) <= 1 + elapsed / integration.SEND_EVERY_S
    client = mlflow.MlflowClient(store)
    run_id = json.loads((run_dir / "mlflow.json").read_text())["run_id"]
    losses = sorted((r["step"], r["train/loss"]) for r in records if "train/loss" in r)
    assert history(client, run_id, "train/loss") == losses
