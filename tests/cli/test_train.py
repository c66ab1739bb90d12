"""`overt train` end to end, in a subprocess, as a user runs it."""

from __future__ import annotations

import pytest

import json
import re
from pathlib import Path

import yaml

from tests.conftest import REPO, correctness_findings, run_overt


def test_default_recipe_trains_to_95_percent_and_writes_the_run_directory(tmp_path):
    proc = run_overt("train", f"run_dir={tmp_path / 'run'}", "progress=plain")
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.jsonl", "model.safetensors", "summary.json", "status.json"):
        assert (run / name).is_file(), name
    assert list((run / "tb").glob("events.out.tfevents.*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["epochs"] == 20
    assert summary["final"]["val/accuracy"] >= 0.95
    assert correctness_findings(summary["findings"]) == []  # the guards ran and the built-in recipe is clean
    assert set(summary["versions"]) == {"python", "torch", "overt"}
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all("step" in r and "epoch" in r for r in records)
    assert any("train/loss" in r for r in records) and any("val/accuracy" in r for r in records)
    # not a terminal: plain progress lines with throughput and ETA, then a short summary
    assert re.search(r"samples/s\s+eta \d+:\d\d:\d\d", proc.stderr)
    assert "overt: completed 20 epochs" in proc.stderr
    from safetensors.torch import load_file

    weights = load_file(run / "model.safetensors")
    assert weights["net.0.weight"].shape == (128, 64)


def test_overrides_on_the_command_line_reach_the_config(tmp_path):
    proc = run_overt("train", "digits", "epochs=2", "lr=0.01", "hidden=16", f"run_dir={tmp_path / 'r'}",
                     "progress=off")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert (cfg["epochs"], cfg["lr"], cfg["hidden"]) == (2, 0.01, 16)
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["epochs"] == 2


def test_unknown_key_is_a_clear_error_and_writes_nothing(tmp_path):
    proc = run_overt("train", "epochz=2", f"runs_root={tmp_path}")
    assert proc.returncode == 2
    assert "unknown config key 'epochz'" in proc.stderr and "did you mean epochs" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())


def test_bad_value_is_a_clear_error(tmp_path):
    proc = run_overt("train", "epochs=many", f"runs_root={tmp_path}")
    assert proc.returncode == 2 and "bad value for config key 'epochs'" in proc.stderr


def test_recipe_that_fails_to_build_names_its_line_and_leaves_no_run(tmp_path):
    recipe = tmp_path / "broken.py"
    recipe.write_text("import overt\n\ndef build(cfg):\n    return undefined_name\n")
    proc = run_overt("train", str(recipe), f"runs_root={tmp_path / 'runs'}")
    assert proc.returncode == 2
    assert "building recipe" in proc.stderr and f"{recipe}:4" in proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("where", ["import", "build"])
def test_a_recipe_calling_sys_exit_is_an_error_not_a_silent_exit_0(tmp_path, where):
    recipe = tmp_path / "overt" / "exits.py"  # a project folder named overt: the user's line is still shown
    recipe.parent.mkdir()
    recipe.write_text("import sys\nsys.exit(0)\n" if where == "import" else
                      "import sys\n\ndef build(cfg):\n    sys.exit(0)\n")
    proc = run_overt("train", str(recipe), f"runs_root={tmp_path / 'runs'}")
    assert proc.returncode == 2, proc.stderr
    assert "called sys.exit(0)" in proc.stderr and "Traceback" not in proc.stderr
    assert f"{recipe}:{2 if where == 'import' else 4}" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_labels_that_do_not_fit_fail_clearly_without_a_finished_run(tmp_path):
    recipe = tmp_path / "narrow.py"
    recipe.write_text(
        "from overt.recipes.digits import *\n"
        "from overt.recipes import digits\n"
        "def build(cfg):\n"
        "    r = digits.build(cfg)\n"
        "    r.model.net[-1] = nn.Linear(cfg.hidden, 5)  # too few classes for labels 0..9\n"
        "    r.optimizer = torch.optim.AdamW(r.model.parameters())\n"
        "    return r\n"
    )
    proc = run_overt("train", str(recipe), "guards=false", f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert "batch" in proc.stderr and "number of model outputs" in proc.stderr
    assert not (tmp_path / "run" / "summary.json").exists()
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "failed"


def test_existing_run_directory_is_not_overwritten(tmp_path):
    assert run_overt("train", "epochs=1", f"run_dir={tmp_path / 'r'}", "progress=off").returncode == 0
    proc = run_overt("train", "epochs=1", f"run_dir={tmp_path / 'r'}", "progress=off")
    assert proc.returncode == 2 and "already holds a finished run" in proc.stderr


def test_user_recipe_from_a_yaml_config_with_override(tmp_path):
    config = REPO / "examples" / "configs" / "wine.yaml"
    proc = run_overt("train", str(config), "epochs=15", f"runs_root={tmp_path}", "progress=off")
    assert proc.returncode == 0, proc.stderr
    (run,) = tmp_path.glob("wine-*")  # no pinned name: a new folder per training
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs"] == 15 and summary["final"]["val/accuracy"] > 0.9
    again = run_overt("train", str(config), "epochs=1", f"runs_root={tmp_path}", "progress=off")
    assert again.returncode == 0, again.stderr  # edit-and-retrain: a second training is not refused


def test_readme_recipe_is_the_example_file_and_it_runs(tmp_path):
    readme = (REPO / "README.md").read_text()
    block = readme.split("```python\n# examples/recipes/wine.py\n", 1)[1].split("```", 1)[0]
    assert block.strip() == (REPO / "examples/recipes/wine.py").read_text().strip()
    proc = run_overt("train", "examples/recipes/wine.py", f"run_dir={tmp_path / 'w'}", "progress=off")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert summary["final"]["val/accuracy"] > 0.9
    assert correctness_findings(summary["findings"]) == []


def test_help_and_unknown_command():
    assert run_overt("--help").returncode == 0
    proc = run_overt("trian")
    assert proc.returncode == 2 and "unknown command 'trian'" in proc.stderr


def test_import_overt_is_light():
    import subprocess
    import sys

    code = "import sys, overt; print(sorted(m for m in ('torch', 'rich', 'tensorboard', 'sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300).stdout
    assert out.strip() == "[]"


def test_a_stopped_run_directory_points_to_overt_resume(tmp_path):
    from overt.errors import ConfigError
    from overt.run.rundir import claim

    (tmp_path / "summary.json").write_text(json.dumps({"status": "preempted"}))
    (tmp_path / "checkpoints" / "step-000004").mkdir(parents=True)
    try:
        claim(tmp_path)
    except ConfigError as exc:
        assert "preempted run" in str(exc) and f"overt resume {tmp_path}" in str(exc)
    else:
        raise AssertionError("claim() accepted a directory holding a run")
