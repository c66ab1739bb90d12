"""The trust file (overt.recipes.trust) is the user's record, and a recipe inside a run directory is
not the user's code: a damaged record is kept and said, never overwritten; a record that cannot be
written is said; `overt train RUN/config.yaml` says which file it imports (path and sha256) and
does not turn that into trust for predict, export and resume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from overt.cli import main as overt_main
from overt.errors import RecipeError
from overt.recipes import trust

MINE = "from overt.recipes import tiny\ndefaults = dict(tiny.defaults, epochs=1)\nbuild = tiny.build\n" \
       "build_model = tiny.build_model\n"


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "state" / "trusted-recipes.json"
    monkeypatch.setenv("OVERT_TRUST_FILE", str(path))
    return path


def _source(tmp_path: Path) -> dict:
    recipe = tmp_path / "mine.py"
    recipe.write_text(MINE)
    return trust.source_of(str(recipe))


@pytest.mark.parametrize("damage", ["not json {", "[" * 200000, '{"recipes": 3}', "\udcff", "folder"])
def test_a_damaged_trust_file_is_kept_and_said_never_overwritten(tmp_path, store, capsys, damage):
    store.parent.mkdir(parents=True)
    if damage == "folder":
        store.mkdir()  # unreadable as a file
        before = None
    else:
        store.write_bytes(damage.encode("utf-8", "surrogateescape"))
        before = store.read_bytes()
    source = _source(tmp_path)
    assert trust.remember(source) is False
    err = capsys.readouterr().err
    assert f"the trust file {store} is unusable" in err and "was kept as it is" in err and f"mv {store}" in err
    assert "Traceback" not in err and "RecursionError" not in err
    if before is not None:
        assert store.read_bytes() == before
    # reading it trusts nothing, says why, and raises no RecursionError
    assert not trust.remembered(source)
    with pytest.raises(RecipeError) as refused:
        trust.authorize(source["spec"], recorded={"sha256": source["sha256"], "file": source["file"]})
    assert "unusable" in refused.value.fix


def test_a_record_that_cannot_be_written_is_said(tmp_path, store, capsys):
    store.parent.parent.mkdir(parents=True, exist_ok=True)
    store.parent.write_text("a file where the folder belongs\n")
    assert trust.remember(_source(tmp_path)) is False
    err = capsys.readouterr().err
    assert "cannot record the recipe" in err and "OVERT_TRUST_FILE" in err and "--trust-recipe" in err


def test_a_good_record_is_kept_and_extended_without_following_a_planted_link(tmp_path, store, capsys):
    import os

    store.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    pid = os.getpid()
    for guess in range(max(1, pid - 50), pid + 50):  # the temporary name used to be .NAME.<pid>.tmp
        (store.parent / f".{store.name}.{guess}.tmp").symlink_to(victim)
    source = _source(tmp_path)
    assert trust.remember(source) is True and trust.remembered(source)
    assert victim.read_text() == "precious\n"
    assert [e["sha256"] for e in json.loads(store.read_text())["recipes"]] == [source["sha256"]]


def test_training_a_config_inside_a_run_directory_says_which_file_runs_and_trusts_nothing(
        tmp_path, store, capsys, monkeypatch):
    """A downloaded run directory holding its own recipe: training it is the user's choice, but it is
    named (path and sha256) before the import and never recorded as trusted."""
    monkeypatch.chdir(tmp_path)
    downloaded = tmp_path / "downloaded"
    downloaded.mkdir()
    recipe = downloaded / "recipe.py"
    recipe.write_text(MINE)
    (downloaded / "config.yaml").write_text(f"recipe: {recipe}\nepochs: 1\n")
    (downloaded / "status.json").write_text('{"status": "completed"}\n')
    run = tmp_path / "mine"
    assert overt_main(["train", str(downloaded / "config.yaml"), f"run_dir={run}", "progress=off",
                       "guards=false"]) == 0
    err = capsys.readouterr().err
    digest = hashlib.sha256(recipe.read_bytes()).hexdigest()
    assert f"importing recipe {recipe} (sha256 {digest})" in err and f"inside the run directory {downloaded}" in err
    assert "not recorded as trusted" in err
    assert not store.exists() or digest not in store.read_text()
    rows = tmp_path / "rows.csv"
    rows.write_text("3,-3,0,0\n")
    assert overt_main(["predict", str(run), str(rows)]) == 2  # predict asks: the file was never trusted
    assert "--trust-recipe" in capsys.readouterr().err
