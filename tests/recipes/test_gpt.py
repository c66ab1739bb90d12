"""The built-in ``gpt`` recipe at a tiny size, and the GPU speed script's CPU mode (``--tiny``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest
import torch

from overt.errors import DataError
from tests.conftest import REPO, SHARED_DATA

TEXT = SHARED_DATA / "tinyshakespeare" / "input.txt"
needs_text = pytest.mark.skipif(not TEXT.is_file(), reason=f"{TEXT} is absent")
TINY = {"layers": 1, "heads": 2, "embed": 32, "context": 32, "stride": 16, "limit_chars": 20000, "batch_size": 16,
        "progress": "off", "tensorboard": False, "ignore": ["effective-batch-size"]}


def build(**overrides):
    from overt.engine.seeding import seed_everything
    from overt.recipes.base import build_recipe, recipe_config

    module, cfg = recipe_config("gpt", {**TINY, "text": str(TEXT), **overrides})
    seed_everything(cfg.seed)
    return build_recipe(module, cfg), cfg


def test_the_default_size_is_a_25m_parameter_model_with_tied_embeddings():
    from overt.recipes.gpt import GPT, n_params

    model = GPT(66, context=256, layers=8, heads=8, embed=512, dropout=0.1)
    assert 20e6 < n_params(model) < 30e6
    assert model.head.weight is model.tok.weight
    assert model(torch.zeros(2, 256, dtype=torch.int64)).shape == (2, 256, 66)


@needs_text
def test_gpt_trains_on_tiny_shakespeare_and_its_windows_are_shifted_by_one(one_thread):
    import overt

    recipe, cfg = build(epochs=2)
    x, y = recipe.train_data[3]
    assert x.shape == y.shape == (32,) and torch.equal(x[1:], y[:-1])
    trainer = overt.Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                            metrics=recipe.metrics, callbacks=recipe.callbacks, config=cfg)
    summary = trainer.fit()
    assert summary["final"]["val/loss"] < 3.6 < torch.log(torch.tensor(len(recipe.meta["vocab"]))).item()
    assert summary["final"]["val/perplexity"] > 1 and 0 < summary["final"]["val/accuracy"] < 1
    assert not [f for f in summary.get("findings", []) if f["severity"] in ("warning", "error")]


@needs_text
def test_activation_checkpointing_names_the_blocks(one_thread):
    import overt

    recipe, cfg = build(epochs=1, activation_checkpointing=["Block"])
    trainer = overt.Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, config=cfg)
    assert all(getattr(b, "_overt_checkpointed", False) for b in trainer.model.blocks)


def test_a_missing_text_file_says_which_setting_points_at_it(tmp_path):
    with pytest.raises(DataError) as err:
        build(text=str(tmp_path / "nope.txt"))
    assert "text=" in str(err.value) and "nope.txt" in str(err.value)


@needs_text
def test_the_speed_script_runs_every_variant_in_tiny_mode(tmp_path, one_thread):
    spec = importlib.util.spec_from_file_location("gpu_speed", REPO / "benchmarks" / "gpu_speed.py")
    speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed)
    out = tmp_path / "speed.json"
    result = speed.main(["--tiny", "--text", str(TEXT), "--json", str(out), "--md", str(tmp_path / "speed.md")])
    assert json.loads(out.read_text())["summary"].keys() == set(speed.VARIANTS)
    for name, s in result["summary"].items():
        assert s.get("tokens_per_s_best", 0) > 0, (name, s)
        assert s["mfu_best"] is None  # no peak on a CPU
    assert "d/b (target >= 0.98)" in (tmp_path / "speed.md").read_text()


@pytest.mark.slow
def test_gpu_check_script_rehearses_on_a_cpu_and_always_writes_its_summary(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "GPU_CHECK_TINY": "1", "PYTHON": os.environ.get("PYTHON", "python3")}
    import sys

    env["PYTHON"] = sys.executable
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                          timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert "summary.md" in files and len(files) <= 8 and all(p.is_file() for p in out.iterdir())
    summary = (out / "summary.md").read_text()
    for part in ("setup-wheels", "environment", "doctor-digits", "cuda-tests", "speed"):
        assert part in summary
