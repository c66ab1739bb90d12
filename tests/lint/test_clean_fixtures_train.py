"""The 'correct' fixtures are real, working training code: run a few of them and
check they learn. (They are what lint must stay quiet on.)"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

CLEAN = Path(__file__).parent / "fixtures" / "clean"


def _run(name: str, tmp_path: Path) -> dict:
    torch.manual_seed(0)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        return runpy.run_path(str(CLEAN / name))
    finally:
        os.chdir(cwd)


def test_script_style_trains_and_checkpoints(tmp_path):
    ns = _run("script_style.py", tmp_path)
    assert (tmp_path / "small.pt").is_file()
    history = [float(h) for h in ns["history"]]
    assert sum(history[-12:]) / 12 < sum(history[:12]) / 12  # the loss fell


def test_reset_variants_learn(tmp_path):
    ns = _run("reset_variants.py", tmp_path)
    w = ns["w"].detach()
    start = sum(float((y ** 2).mean()) for _, y in ns["data"])  # w starts at zero
    end = sum(float(((x @ w - y) ** 2).mean()) for x, y in ns["data"])
    assert end < start
    assert ns["w"].grad is not None and float(ns["w"].grad.abs().sum()) == 0.0  # reset after each step


def test_gan_style_runs_both_players(tmp_path):
    ns = _run("gan_style.py", tmp_path)
    assert len(ns["d_losses"]) == len(ns["g_losses"]) == 20
    assert all(not g.requires_grad for g in ns["g_losses"])


def test_lbfgs_closure_converges(tmp_path):
    ns = _run("lbfgs_closure.py", tmp_path)
    assert torch.allclose(ns["params"].detach(), ns["target"], atol=1e-3)
