"""A finished two-epoch digits run (checkpoints step-000045 and step-000090), shared read-only:
tests copy it before changing anything."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def two_epochs(tmp_path_factory) -> Path:
    from overt.cli.train import main as train

    run_dir = tmp_path_factory.mktemp("two-epochs") / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=2", "progress=off", "tensorboard=false",
                  "guards=false"]) == 0
    return run_dir
