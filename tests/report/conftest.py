"""Real short runs on scikit-learn digits, written to run directories, for the report tests."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

QUIET = {"progress": "off", "checkpoint": False, "tensorboard": False, "log_every": 10}


def train_run(run_dir: Path, digits, *, epochs: int = 2, forward=None, **kw):
    """A real digits run (MLP, AdamW, guards on) into ``run_dir`` from Python; returns the summary."""
    import torch
    from torch import nn

    import overt
    from overt.recipes.digits import DigitsMLP

    torch.manual_seed(0)
    model = DigitsMLP(32, 0.1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    kw = {**QUIET, "monitor": "val/accuracy", "monitor_mode": "max", **kw}
    return overt.fit(model, optimizer, nn.CrossEntropyLoss(), digits[0], digits[1], epochs=epochs,
                     metrics={"accuracy": overt.metrics.accuracy}, run_dir=run_dir, forward=forward, **kw)


def train_recipe(run_dir: Path, *overrides: str) -> dict:
    """The built-in digits recipe for 2 epochs, as `overt train digits KEY=VALUE...` runs it (in-process)."""
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe as train_in_process

    quiet = [f"{k}={str(v).lower()}" for k, v in QUIET.items()]
    module, cfg = resolve_run_config("digits", ["epochs=2", "hidden=32", *quiet, f"run_dir={run_dir}", *overrides])
    return train_in_process(cfg, module)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("report") / "digits-a"
    train_recipe(run_dir)
    return run_dir


@pytest.fixture(scope="session")
def other_lr_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("report") / "digits-b"
    train_recipe(run_dir, "lr=0.01")
    return run_dir
