"""`overt predict` and `overt export` against the third reliability campaign (issue 34 items 6, 7, 8, 9, 14,
17; issue 35 items 2 and 7): one answer per input row or an error naming the line, run files checked against
their schema before use, the final weights checked against their hash, answers streamed, exports that do not
overwrite each other.  Each case reproduced on a real digits run."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

import overt
from overt.cli import main as overt_main
from tests.conftest import REPO
from tests.recipes.conftest import train


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """A finished digits run with a checkpoint per epoch (every one kept)."""
    run = tmp_path_factory.mktemp("campaign3") / "digits"
    train("digits", run, epochs=3, checkpoint=True, keep_last=10)
    return run


@pytest.fixture
def copy(digits, tmp_path):
    """A copy of the digits run, to damage."""
    def make():
        target = tmp_path / "run"
        shutil.copytree(digits, target)
        return target
    return make


def rows(n=6):
    from sklearn.datasets import load_digits

    return load_digits().data[:n]


@pytest.fixture
def predict(capsys, monkeypatch):
    """`overt predict RUN ARGS` in this process (stdin from ``stdin``): (exit status, stdout lines, stderr)."""
    def run(run_dir, *args, stdin: str = ""):
        capsys.readouterr()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = overt_main(["predict", str(run_dir), *map(str, args)])
        out = capsys.readouterr()
        assert "Traceback" not in out.err, out.err
        return code, out.out.splitlines(), out.err

    return run


ROW = ",".join(["1"] * 64)


def classes(lines):
    return [json.loads(line)["class"] for line in lines]


# -- item 6: one answer per input row, in order, or an error naming the line --------------------------------
def test_a_numeric_header_as_pandas_writes_it_is_a_header_not_a_row(digits, tmp_path, predict):
    expected = [a["class"] for a in overt.Predictor.from_run(digits, quiet=True).predict(rows())]
    path = tmp_path / "frame.csv"  # pandas.DataFrame(X).to_csv(index=False): a header 0,1,...,63
    path.write_text(",".join(str(i) for i in range(64)) + "\n"
                    + "".join(",".join(f"{v:.1f}" for v in r) + "\n" for r in rows()))
    code, out, err = predict(digits, path)
    assert code == 0 and classes(out) == expected  # 6 answers for 6 rows, none shifted
    assert "line 1 of" in err and "is read as a header" in err


def test_a_record_of_empty_cells_is_an_error_naming_its_line(digits, tmp_path, predict):
    path = tmp_path / "gap.csv"
    lines = [",".join(f"{v:g}" for v in r) for r in rows(4)]
    path.write_text("\n".join(lines[:2] + ["," * 63] + lines[2:]) + "\n")
    code, out, err = predict(digits, path)
    assert code == 2 and f"{path}, line 3: a record of 64 empty cell(s)" in err and "fix:" in err


def test_a_header_only_csv_is_an_error_not_a_silent_success(digits, tmp_path, predict):
    path = tmp_path / "header.csv"
    path.write_text(",".join(f"pixel_{i}" for i in range(64)) + "\n")
    code, out, err = predict(digits, path)
    assert code == 2 and out == [] and "no inputs" in err and "holds no inputs (0 rows below its header)" in err


def test_a_csv_piped_without_format_is_read_as_csv_a_text_file_of_numbers_says_format_csv(digits, tmp_path, predict):
    csv_text = "".join(",".join(f"{v:g}" for v in r) + "\n" for r in rows(3))
    code, out, err = predict(digits, stdin=csv_text)  # a model of numbers reads stdin as CSV
    assert code == 0 and len(out) == 3
    path = tmp_path / "rows.txt"
    path.write_text(csv_text)
    code, out, err = predict(digits, path)
    assert code == 2 and "--format csv" in err and f"{path}, line 1" in err
    code, out, err = predict(digits, path, "--format", "csv")
    assert code == 0 and len(out) == 3


# -- item 17: answers streamed in chunks, in bounded memory --------------------------------------------------
def test_answers_are_written_as_they_are_computed_and_an_error_names_its_line(digits, tmp_path, predict):
    """10,000 rows with a bad cell on line 9,001: the answers of the chunks before it are already out
    (streamed, not held until the end), the error names the file and the line, the exit status is 2."""
    data = np.tile(rows(10), (1000, 1)).astype(int)
    path = tmp_path / "large.csv"
    lines = [",".join(map(str, r)) for r in data]
    lines[9000] = lines[9000].replace("0", "x", 1)
    path.write_text("\n".join(lines) + "\n")
    code, out, err = predict(digits, path)
    assert code == 2 and f"{path}, line 9001" in err and "is not a number" in err
    assert len(out) == 8192 and classes(out[:10]) == classes(out[10:20])  # two chunks of 4096, in order
    assert "inputs answered" not in err  # no progress line when stderr is not a terminal
    lines[9000] = lines[8990]
    path.write_text("\n".join(lines) + "\n")
    code, out, err = predict(digits, path)
    assert code == 0 and len(out) == 10000 and classes(out[9000:9010]) == classes(out[:10])


def test_strict_writes_nothing_when_a_later_chunk_is_skewed(digits, tmp_path, predict):
    data = np.tile(rows(10), (500, 1))
    data[4500:] /= 16  # the last rows arrive already scaled: skewed
    path = tmp_path / "late-skew.csv"
    np.savetxt(path, data, fmt="%g", delimiter=",")
    code, out, err = predict(digits, path, "--strict")
    assert code == 1 and out == [] and "train-serve-skew" in err and "500 of 5000 input(s)" in err


# -- item 7 and 14: the run's files are checked before use ----------------------------------------------------
@pytest.mark.parametrize("damage,words", [
    (lambda r: "{\"sample\": ", ["inputs.json is damaged: it is not JSON"]),
    (lambda r: json.dumps({**r, "preprocessing": {**r["preprocessing"], "scale": "16"}}),
     ["inputs.json is damaged: preprocessing.scale"]),
    (lambda r: json.dumps({**r, "preprocessing": {**r["preprocessing"], "width": -1}}),
     ["preprocessing.width"]),
    (lambda r: json.dumps({**r, "stats": {**r["stats"], "mean": r["stats"]["mean"][:5]}}),
     ["stats lists differ in length"]),
    (lambda r: json.dumps({**r, "preprocessing": {"tokens": {"vocab": ["a"], "pattern": "(a|a)*$"}}}),
     ["tokens.pattern", "not a plain token pattern", "catastrophic backtracking"]),
    (lambda r: json.dumps([1, 2]), ["holds a JSON list"]),
    (None, ["inputs.json is missing"]),
])
def test_a_damaged_inputs_json_is_an_error_naming_the_file_and_field(copy, damage, words, predict):
    run = copy()
    path = run / "inputs.json"
    if damage is None:
        path.unlink()
    else:
        path.write_text(damage(json.loads(path.read_text())))
    code, out, err = predict(run, ROW)  # a catastrophic pattern would hang here
    assert code == 2 and out == [] and "no preprocessing" not in err
    for word in words:
        assert word in err, err


def test_a_flipped_bit_in_the_final_weights_is_an_error(copy, predict):
    run = copy()
    weights = run / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-7] ^= 0x10  # one bit of one weight
    weights.write_bytes(bytes(data))
    code, out, err = predict(run, ROW)
    assert code == 2 and "does not match the SHA-256 the run recorded when it finished" in err
    assert "--checkpoint last" in err
    assert overt_main(["export", str(run), "--format", "pt2", "--out", str(run.parent / "m.pt2")]) == 2
    code, out, err = predict(run, ROW, "--checkpoint", "last")  # the checkpoints carry their hashes
    assert code == 0 and len(out) == 1


def test_a_run_without_a_weights_hash_is_checked_against_its_final_checkpoint(copy, predict):
    run = copy()
    summary = json.loads((run / "summary.json").read_text())
    del summary["weights_sha256"]  # as a run finished by an older overt
    (run / "summary.json").write_text(json.dumps(summary))
    assert predict(run, ROW)[0] == 0
    weights = run / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-7] ^= 0x10
    weights.write_bytes(bytes(data))
    code, out, err = predict(run, ROW)
    assert code == 2 and "differs from the run's final checkpoint" in err


def test_checkpoint_best_names_a_checkpoint_whose_manifest_is_missing(copy, predict):
    run = copy()
    steps = sorted((run / "checkpoints").glob("step-*"))
    (steps[-1] / "manifest.json").unlink()
    code, out, err = predict(run, ROW, "--checkpoint", "best")
    assert code == 0 and f"checkpoint {steps[-1]} is unusable: {steps[-1].name} has no manifest.json" in err
    assert "left out of the choice of the best" in err and "1 unusable one(s) left out" in err


@pytest.mark.parametrize("edit,words", [
    ({"hidden": 200000000}, ["builds a model of", "that is not the one trained", "restore config.yaml"]),
    ({"hidden": -5}, ["config.yaml"]),
    ({"hidden": "wide"}, ["config.yaml"]),
])
def test_a_tampered_config_is_refused_before_the_model_is_built(copy, edit, words, predict):
    run = copy()
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **edit}))
    code, out, err = predict(run, ROW)
    assert code == 2 and out == []
    for word in words:
        assert word in err, err


@pytest.mark.parametrize("name,text,words", [
    ("recipe_meta.json", "[1]", ["recipe_meta.json is damaged: it holds a JSON list"]),
    ("recipe_meta.json", "{", ["recipe_meta.json is damaged: it is not JSON"]),
    ("config.yaml", None, ["does not accept this run's config", "restore config.yaml"]),
])
def test_a_damaged_meta_or_config_value_names_the_file(copy, predict, name, text, words):
    run = copy()
    if text is None:  # a value of the wrong type
        text = (run / name).read_text().replace("batch_size: 32", "batch_size: x")
    (run / name).write_text(text)
    code, out, err = predict(run, ROW)
    assert code == 2 and out == []
    for word in words:
        assert word in err, err


def test_a_damaged_recipe_source_json_is_an_error_naming_the_field(tmp_path, predict):
    recipe = tmp_path / "mine.py"
    recipe.write_text("from overt.recipes.digits import *  # noqa\nfrom overt.recipes import digits\n"
                      "defaults = dict(digits.defaults, epochs=1)\n")
    run = tmp_path / "run"
    assert overt_main(["train", str(recipe), f"run_dir={run}", "progress=off", "tensorboard=false",
                       "checkpoint=false"]) == 0
    source = json.loads((run / "recipe_source.json").read_text())
    (run / "recipe_source.json").write_text(json.dumps({**source, "sha256": 5}))
    code, out, err = predict(run, ROW)
    assert code == 2 and "recipe_source.json is damaged: sha256 is not 64 hexadecimal digits" in err


# -- issue 35 item 2 and 7: exports side by side, the files named, no exporter chatter -------------------------
@pytest.fixture(scope="module")
def exported(digits, tmp_path_factory):
    """The digits run exported to ONNX and then to pt2 into one folder, as the docs' sequence does."""
    from overt.export import export_run

    folder = tmp_path_factory.mktemp("exported")
    results = {fmt: export_run(digits, fmt, folder / f"model.{fmt}", quiet=True) for fmt in ("onnx", "pt2")}
    return folder, results


def test_onnx_then_pt2_exports_keep_both_servable_and_name_every_file(digits, exported, tmp_path):
    from overt.serving import load_exported

    folder, results = exported
    assert results["onnx"].files == [folder / "model.onnx", folder / "model.onnx.serving.json"]
    assert not (folder / "model.onnx.data").exists()  # a small model's weights are inside model.onnx
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for path in results["onnx"].files:  # the files the export names are enough to serve it elsewhere
        shutil.copy(path, shipped / path.name)
    expected = [a["class"] for a in overt.Predictor.from_run(digits, quiet=True).predict(rows())]
    for model in (shipped / "model.onnx", folder / "model.pt2"):
        assert [a["class"] for a in load_exported(model).predict(rows())] == expected


@pytest.mark.slow
def test_the_export_command_names_its_files_and_prints_no_exporter_warnings(digits, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(digits, run)
    proc = subprocess.run([sys.executable, "-m", "overt", "export", str(run), "--format", "onnx"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "torchvision" not in proc.stderr  # no exporter chatter
    assert f"wrote {run / 'model.onnx'} and {run / 'model.onnx.serving.json'}" in proc.stdout
    assert "copy all 2 files together" in proc.stdout


def test_export_out_into_a_missing_folder_says_so(digits, tmp_path, capsys):
    assert overt_main(["export", str(digits), "--out", str(tmp_path / "no" / "such" / "m.onnx")]) == 2
    err = capsys.readouterr().err
    assert "the folder" in err and "does not exist" in err and "mkdir -p" in err and "traceable" not in err


@pytest.mark.parametrize("damage,words", [
    (lambda spec: "not json", ["is not JSON"]),
    (lambda spec: json.dumps({**spec, "format": "pt2", "model": "model.pt2"}), ["describes model.pt2 (pt2)"]),
    (lambda spec: json.dumps({**spec, "preprocessing": {**spec["preprocessing"], "scale": [1, 2]}}),
     ["scale has 2 values for 64 features"]),
    (lambda spec: json.dumps({**spec, "inputs": {"stats": 3}}), ["stats"]),
])
def test_load_exported_raises_overt_errors(exported, tmp_path, damage, words):
    from overt.errors import OvertError
    from overt.serving import load_exported

    folder, _ = exported
    for name in ("model.onnx", "model.onnx.serving.json"):
        shutil.copy(folder / name, tmp_path / name)
    spec_path = tmp_path / "model.onnx.serving.json"
    spec_path.write_text(damage(json.loads(spec_path.read_text())))
    with pytest.raises(OvertError) as caught:
        load_exported(tmp_path / "model.onnx")
    for word in words:
        assert word in str(caught.value)


def test_load_exported_on_a_damaged_or_missing_model_file_is_an_overt_error(exported, tmp_path):
    from overt.errors import OvertError
    from overt.serving import load_exported

    folder, _ = exported
    shutil.copy(folder / "model.pt2.serving.json", tmp_path / "model.pt2.serving.json")
    (tmp_path / "model.pt2").write_bytes(b"not a zip")
    with pytest.raises(OvertError, match="cannot be loaded as a pt2 model"):
        load_exported(tmp_path / "model.pt2")
    (tmp_path / "model.pt2").unlink()
    with pytest.raises(OvertError, match="does not exist"):
        load_exported(tmp_path / "model.pt2")
