"""Weights & Biases as a callback (``wandb=true``), offline: on a real digits run."""

from __future__ import annotations

import pytest

from tests.report.conftest import train_recipe


def test_wandb_offline_logs_the_run_without_network(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    summary = train_recipe(tmp_path / "run", "wandb_mode=offline", "wandb_project=overt-test")
    assert summary["status"] == "completed"
    (events,) = list((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    data = events.read_bytes()
    for key in (b"val/accuracy", b"train/loss", b"overt/findings", b"overt-test"):
        assert key in data
