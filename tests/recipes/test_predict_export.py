"""overt.Predictor, `overt predict` and `overt export` on finished runs of the built-in recipes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

import overt
from overt.predict.predictor import RunError
from tests.conftest import run_overt


def test_predictor_names_the_recipe_it_imports_and_loads_only_safetensors(runs, capsys):
    run = runs("tiny")
    overt.Predictor.from_run(run)
    err = capsys.readouterr().err
    assert "recipe tiny" in err and "overt/recipes/tiny.py" in err and "config.yaml" in err


def test_predictor_refuses_an_unfinished_run(runs, tmp_path):
    run = tmp_path / "unfinished"
    shutil.copytree(runs("tiny"), run)
    (run / "model.safetensors").unlink()
    with pytest.raises(RunError, match="did not finish"):
        overt.Predictor.from_run(run, quiet=True)


def test_predict_cli_reads_csv_and_npy_files_and_writes_json_lines(runs, tmp_path):
    run = runs("tiny")
    csv = tmp_path / "rows.csv"
    csv.write_text("f0,f1,f2,f3\n3,-3,0,0\n-3,3,0,0\n")
    npy = tmp_path / "rows.npy"
    np.save(npy, np.array([[3.0, -3.0, 0.0, 0.0]], dtype=np.float32))
    proc = run_overt("predict", str(run), str(csv), str(npy))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["class"] for r in lines] == [1, 0, 1]


def test_predict_cli_reads_stdin_and_rejects_bad_inputs_with_exit_2(runs, tmp_path, monkeypatch, capsys):
    import io

    from overt.cli import main

    run = str(runs("tiny"))
    monkeypatch.setattr("sys.stdin", io.StringIO("3,-3,0,0\n"))
    assert main(["predict", run, "--format", "csv"]) == 0
    assert json.loads(capsys.readouterr().out)["class"] == 1
    assert main(["predict", run, str(tmp_path / "missing.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("1,2\n"))
    assert main(["predict", run, "--format", "csv"]) == 2
    assert "rows of 4 features" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_export_matches_the_eager_model_on_validation_inputs(runs, tmp_path, fmt):
    from overt.export import export_run

    result = export_run(runs("tiny"), fmt, tmp_path / f"tiny.{fmt}", quiet=True)
    assert result.path.is_file() and result.samples == 16
    assert result.ok and result.max_abs_diff < 1e-5


def test_export_cli_prints_the_difference(runs, tmp_path, capsys):
    from overt.cli import main

    assert main(["export", str(runs("house-prices")), "--format", "pt2", "--out", str(tmp_path / "h.pt2")]) == 0
    out = capsys.readouterr().out
    assert "max abs diff" in out and "raw validation inputs through the declared preprocessing" in out
    assert "answers identical to overt predict" in out and (tmp_path / "h.pt2.serving.json").is_file()
    assert main(["export", str(tmp_path), "--format", "pt2"]) == 2  # not a run directory


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["sentiment", "mnist", "char-rnn", "resnet", "house-prices"])
@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_every_recipe_exports_with_parity(runs, tmp_path, recipe, fmt):
    from overt.export import export_run

    result = export_run(runs(recipe), fmt, tmp_path / f"m.{fmt}", quiet=True)
    assert result.ok, result.max_abs_diff
