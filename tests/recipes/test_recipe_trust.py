"""A run directory runs no code unless the user says so: `overt predict`, `overt export` and
`overt resume` import a recipe file the run names only when this machine trained the run with
that exact file, or with --trust-recipe / --recipe FILE; the file and its hash come first."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

import overt
from overt.cli import main as overt_main
from overt.errors import RecipeError
from tests.checkpoint.conftest import forge_manifest

EVIL = ("import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
        "from overt.recipes.tiny import build, build_model, defaults  # noqa\n")
MINE = "from overt.recipes import digits\ndefaults = dict(digits.defaults, epochs=1)\nbuild = digits.build\n"


def rows(tmp_path: Path) -> str:
    path = tmp_path / "rows.csv"
    path.write_text("3,-3,0,0\n")
    return str(path)


def tampered(runs, tmp_path: Path, *, forge_hash: bool = True) -> tuple[Path, Path, Path]:
    """A copy of a finished tiny run whose config.yaml names a recipe file that writes a marker when imported
    (and, with ``forge_hash``, whose recipe_source.json carries that file's true hash)."""
    marker, evil = tmp_path / "marker", tmp_path / "evil_recipe.py"
    evil.write_text(EVIL.format(marker=str(marker)))
    run = tmp_path / "downloaded-run"
    shutil.copytree(runs("tiny"), run)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["recipe"] = str(evil)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    if forge_hash:
        digest = hashlib.sha256(evil.read_bytes()).hexdigest()
        (run / "recipe_source.json").write_text(json.dumps({"spec": str(evil), "file": str(evil), "sha256": digest}))
    return run, evil, marker


@pytest.mark.parametrize("command", ["predict", "export"])
@pytest.mark.parametrize("forge_hash", [True, False])
def test_a_tampered_run_directory_runs_no_code(runs, tmp_path, capsys, command, forge_hash):
    run, evil, marker = tampered(runs, tmp_path, forge_hash=forge_hash)
    args = [command, str(run), *([rows(tmp_path)] if command == "predict" else ["--format", "pt2",
                                                                          "--out", str(tmp_path / "m.pt2")])]
    assert overt_main(args) == 2
    err = capsys.readouterr().err
    assert not marker.exists()  # refused before the import: its code never ran
    said = "was not trained with on this machine" if forge_hash else "but it was trained with"
    assert said in err and "--trust-recipe" in err and "Traceback" not in err
    assert str(evil) in err


def test_trust_recipe_is_consent_and_the_file_and_hash_are_printed_before_the_import(runs, tmp_path, capfd):
    run, evil, marker = tampered(runs, tmp_path)
    digest = hashlib.sha256(evil.read_bytes()).hexdigest()
    assert overt_main(["predict", str(run), rows(tmp_path), "--trust-recipe"]) == 0
    assert marker.exists()
    err = capfd.readouterr().err
    assert f"overt: importing recipe {evil} (sha256 {digest}), trusted on the command line" in err


def test_recipe_option_names_the_file_to_use(runs, tmp_path, capsys):
    run, evil, marker = tampered(runs, tmp_path)
    mine = tmp_path / "mine.py"
    mine.write_text("from overt.recipes.tiny import build, build_model, defaults  # noqa\n")
    assert overt_main(["predict", str(run), rows(tmp_path), "--recipe", str(mine)]) == 0
    assert not marker.exists()  # the file the run names is never looked at
    captured = capsys.readouterr()
    assert f"overt: importing recipe {mine} (sha256 {hashlib.sha256(mine.read_bytes()).hexdigest()}), named with " \
           "--recipe" in captured.err
    assert json.loads(captured.out)["class"] == 1


def test_a_recipe_module_path_is_not_even_located_unasked(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs("tiny"), run)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["recipe"] = "antigravity"  # importing it opens a web browser
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(RecipeError, match="never ran on this machine"):
        overt.Predictor.from_run(run, quiet=True)


def test_the_users_own_recipe_file_trained_here_is_used_without_asking(tmp_path, capsys):
    recipe = tmp_path / "mine.py"
    recipe.write_text(MINE)
    run = tmp_path / "run"
    assert overt_main(["train", str(recipe), f"run_dir={run}", "progress=off", "tensorboard=false",
                       "checkpoint=false"]) == 0
    capsys.readouterr()
    predictor = overt.Predictor.from_run(run)
    digest = hashlib.sha256(recipe.read_bytes()).hexdigest()
    err = capsys.readouterr().err
    assert f"overt: importing recipe {recipe} (sha256 {digest}): the file this run was trained with on this " \
           "machine" in err
    assert predictor.model is not None
    recipe.write_text(MINE + "# edited\n")  # changed since: refused
    with pytest.raises(RecipeError, match="source changed"):
        overt.Predictor.from_run(run, quiet=True)


def forge_checkpoint(run: Path, recipe: str, sha256: str | None) -> Path:
    """Rewrite the newest checkpoint's config to name ``recipe`` with the given recorded hash, manifest forged."""
    folder = sorted((run / "checkpoints").glob("step-*"))[-1]
    state = json.loads((folder / "state.json").read_text())
    state["meta"]["config"]["recipe"] = recipe
    state["meta"]["recipe_source"] = None if sha256 is None else {"spec": recipe, "file": recipe, "sha256": sha256}
    (folder / "state.json").write_text(json.dumps(state))
    forge_manifest(folder)
    return folder


@pytest.mark.parametrize("recorded", ["null", "true hash"])
def test_resume_of_a_forged_checkpoint_runs_no_code(tmp_path, capsys, recorded):
    run = tmp_path / "run"
    assert overt_main(["train", "tiny", f"run_dir={run}", "progress=off", "tensorboard=false", "epochs=2"]) == 0
    marker, evil = tmp_path / "marker", tmp_path / "evil_recipe.py"
    evil.write_text(EVIL.format(marker=str(marker)))
    digest = hashlib.sha256(evil.read_bytes()).hexdigest()
    forge_checkpoint(run, str(evil), None if recorded == "null" else digest)
    (run / "summary.json").unlink()
    capsys.readouterr()
    assert overt_main(["resume", str(run), "epochs=3"]) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert "--trust-recipe" in err and "Traceback" not in err
    assert ("records no hash" in err) if recorded == "null" else ("was not trained with on this machine" in err)
    assert overt_main(["resume", str(run), "epochs=3", "--trust-recipe"]) == 0  # consent: now it runs
    assert marker.exists()
