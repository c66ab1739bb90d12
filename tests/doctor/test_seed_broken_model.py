"""The broken model of the third seed's Step 4, fixed one defect at a time: at each stage the
doctor names the defect that is left, in catalog terms (examples/doctor/debug_model.py)."""

from __future__ import annotations

import json

import pytest

import overt
from overt.doctor.cli import main
from tests.conftest import REPO
from tests.doctor.helpers import FAST

RECIPE = str(REPO / "examples" / "doctor" / "debug_model.py")
SPEED = [f"{k}={v}" for k, v in FAST.items() if k != "batch_size"]


def doctor(tmp_path, *overrides):
    code = main([RECIPE, *overrides, *SPEED, f"out={tmp_path}", "--quiet"])
    report = json.loads((tmp_path / "readiness.json").read_text())
    return code, report, (tmp_path / "readiness.md").read_text()


def slugs(report):
    return {f["slug"] for f in report["findings"]}


def test_stage_0_all_defects_missing_super_init_and_plain_list_named_at_build(tmp_path):
    code, report, note = doctor(tmp_path)
    assert code == 1 and report["verdicts"] == {"build": "fail"}
    assert slugs(report) == {"missing-super-init", "unregistered-submodule"}
    by_slug = {f["slug"]: f for f in report["findings"]}
    assert "DebugNet.__init__ never called super().__init__()" in by_slug["missing-super-init"]["message"]
    assert "debug_model.py" in by_slug["missing-super-init"]["where"]
    assert "DebugNet.layers is a plain Python list" in by_slug["unregistered-submodule"]["message"]
    assert "OVT402 missing-super-init" in note
    # the note says only what is known after a failed build, and that it was saved
    assert "None" not in note and "1 probes" not in note and "no probe ran" in note
    assert "not saved" not in note


def test_stage_1_super_fixed_the_plain_list_is_named(tmp_path):
    code, report, _ = doctor(tmp_path, "super_init=true")
    assert code == 1 and slugs(report) == {"unregistered-submodule"}
    assert "empty list" in report["findings"][0]["message"]


def test_stage_2_layers_registered_mse_on_class_labels_is_named(tmp_path):
    code, report, _ = doctor(tmp_path, "super_init=true", "plain_list=false")
    assert code == 1
    assert report["verdicts"]["initial-loss"] == "fail" and report["verdicts"]["optimizer"] == "pass"
    assert "wrong-loss-for-task" in slugs(report)
    # the probes that train are skipped with the reason instead of failing six times over one defect
    assert report["verdicts"]["overfit-batch"] == "skipped"
    assert "loss cannot train on these targets" in report["probes"][4]["reason"]


def test_stage_3_loss_fixed_the_recipe_is_ready(tmp_path):
    code, report, note = doctor(tmp_path, "super_init=true", "plain_list=false", "mse=false")
    assert code == 0 and report["passed"], report["verdicts"]
    assert "## Not checked here" in note and "zero_grad()" in note  # the loop defect is out of its sight


def test_stage_4_the_exercise_validation_without_eval_or_no_grad_is_named():
    from overt.config import resolve
    from overt.recipes.base import build_recipe, load_recipe_module, recipe_defaults

    module = load_recipe_module(RECIPE)
    defaults = recipe_defaults(module)
    cfg = resolve(defaults, {**defaults, "super_init": True, "plain_list": False, "mse": False})
    recipe = build_recipe(module, cfg)
    report = overt.doctor(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                          validate=module.validate, progress=False, only=["validation"])
    assert report.verdicts == {"validation": "fail"}
    assert {f.slug for f in report.findings} == {"train-mode-in-eval", "graph-in-eval"}
    assert "layers.2 (Dropout)" in report.findings[0].message


@pytest.mark.parametrize("override", ["super_init=maybe"])
def test_a_bad_override_is_a_usage_error(tmp_path, override, capsys):
    assert main([RECIPE, override, f"out={tmp_path}"]) == 2
    assert "bad value for config key 'super_init'" in capsys.readouterr().err
