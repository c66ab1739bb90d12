"""A finished two-epoch digits run (checkpoints step-000045 and step-000090), shared read-only:
tests copy it before changing anything."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def two_epochs(tmp_path_factory) -> Path:
    from overt.cli.train import main as train

    run_dir = tmp_path_factory.mktemp("two-epochs") / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=2", "progress=off", "tensorboard=false",
                  "guards=false"]) == 0
    return run_dir


def forge_manifest(folder: Path) -> None:
    """An attacker can write a manifest with the right hashes: verification alone is no defence."""
    manifest = json.loads((folder / "manifest.json").read_text())
    for name in manifest["files"]:
        data = (folder / name).read_bytes()
        manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))
