"""`overt resume` imports the recipe the checkpoint names, so it checks it first: it says which
file it imports and refuses one whose source changed since the run was trained (unless told
otherwise); loading weights never imports anything."""

from __future__ import annotations

import hashlib
from pathlib import Path

from overt.cli import main as overt

RECIPE = "from overt.recipes import digits\ndefaults = dict(digits.defaults, epochs=1)\nbuild = digits.build\n"


def test_a_changed_recipe_is_refused_before_it_runs(tmp_path, capsys):
    recipe, marker = tmp_path / "mine.py", tmp_path / "marker"
    recipe.write_text(RECIPE)
    trained_with = hashlib.sha256(recipe.read_bytes()).hexdigest()
    run_dir = tmp_path / "run"
    assert overt(["train", str(recipe), f"run_dir={run_dir}", "progress=off", "tensorboard=false"]) == 0
    # a finished run is left as it is, nothing imported; without its summary.json it is not complete,
    # so `overt resume` rebuilds it from the final checkpoint, importing the recipe
    (run_dir / "summary.json").unlink()
    assert overt(["resume", str(run_dir)]) == 0  # unchanged: it says what it imports, and resumes
    assert f"overt: importing recipe {recipe} (sha256 {trained_with})" in capsys.readouterr().err

    recipe.write_text(RECIPE + f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n")
    now = hashlib.sha256(recipe.read_bytes()).hexdigest()
    (run_dir / "summary.json").unlink()
    assert overt(["resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "is not the one this run was trained with: its source changed" in err
    assert f"sha256 {trained_with[:12]}..." in err and f"sha256 {now[:12]}..." in err
    assert "--allow-changed-recipe" in err and "Traceback" not in err
    assert not marker.exists()  # refused before importing: the new code never ran

    from overt.checkpoint import load_weights
    from overt.recipes.digits import DigitsMLP

    load_weights(DigitsMLP(128, 0.1), run_dir)  # weights for inference: nothing is imported
    assert not marker.exists()

    assert overt(["resume", str(run_dir), "--allow-changed-recipe"]) == 0
    assert "resuming with it anyway (--allow-changed-recipe)" in capsys.readouterr().err
    assert marker.read_text() == "ran"  # explicitly allowed: now it runs
