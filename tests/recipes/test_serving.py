"""No train/serve skew: a run records what it was trained on and its declared preprocessing; predict applies
that preprocessing to raw inputs, answers with classes and probabilities, and reports inputs unlike the
training data (train-serve-skew); export carries the same contract and serves it with ONNX Runtime."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import overt
from overt.cli import main as overt_main
from tests.conftest import run_overt
from tests.recipes.conftest import assert_same_answers, train


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """A real digits run with checkpoints (one per epoch, every one kept)."""
    run = tmp_path_factory.mktemp("serving") / "digits"
    train("digits", run, epochs=4, checkpoint=True, keep_last=10)
    return run


def raw_digits():
    """(rows straight from load_digits(), validation indices of the run's split)."""
    from sklearn.datasets import load_digits

    from overt.recipes.digits import split_indices

    data = load_digits().data
    return data, split_indices(len(data), 0.2, 0)[1].numpy()


def test_predict_on_raw_load_digits_rows_equals_the_runs_validation_predictions(digits_run):
    from overt.recipes.digits import load_digits_split

    data, val_idx = raw_digits()
    predictor = overt.Predictor.from_run(digits_run, quiet=True)
    answers = predictor.predict(data[val_idx])  # no scaling by the user: the run's preprocessing does it
    assert predictor.findings == []
    _, val = load_digits_split(0.2, 0)
    with torch.inference_mode():
        probs = torch.softmax(predictor.model(val.tensors[0]), dim=-1)  # what validation computed
    assert [a["class"] for a in answers] == probs.argmax(1).tolist()
    assert [a["probability"] for a in answers] == pytest.approx(probs.max(1).values.tolist(), abs=1e-6)
    assert answers[0]["label"] == str(answers[0]["class"]) and len(answers[0]["top"]) == 3
    assert (np.array([a["class"] for a in answers]) == data_target()[val_idx]).mean() > 0.85


def data_target():
    from sklearn.datasets import load_digits

    return load_digits().target


@pytest.mark.parametrize("skew,kind", [("scaled down", "scale"), ("scaled up", "scale"),
                                       ("shuffled columns", "outside"), ("constant", "constant")])
def test_skewed_inputs_give_the_train_serve_skew_finding(digits_run, skew, kind):
    data, val_idx = raw_digits()
    rows = data[val_idx[:50]]
    rows = {"scaled down": rows / 16, "scaled up": rows * 16,
            "shuffled columns": rows[:, np.random.default_rng(0).permutation(64)],
            "constant": np.full((50, 64), 8.0)}[skew]
    predictor = overt.Predictor.from_run(digits_run, quiet=True)
    predictor.predict(rows)
    assert [f.slug for f in predictor.findings] == ["train-serve-skew"]
    finding = predictor.findings[0]
    assert finding.details["kind"] == kind
    assert len(finding.details["rows"]) >= 45  # nearly every row, named
    if skew == "scaled down":
        assert "about 1/1" in finding.message and finding.details["factor"] < 0.1


def test_the_skew_check_stays_quiet_on_real_held_out_rows(digits_run):
    data, val_idx = raw_digits()
    predictor = overt.Predictor.from_run(digits_run, quiet=True)
    predictor.predict(data[val_idx])
    flagged = sum(len(f.details["rows"]) for f in predictor.findings)
    assert flagged / len(val_idx) <= 0.01


def test_predict_cli_report_strict_top_k_raw_and_options_after_inputs(digits_run, tmp_path):
    data, val_idx = raw_digits()
    clean, scaled = tmp_path / "rows.csv", tmp_path / "scaled.csv"
    np.savetxt(clean, data[val_idx[:5]], fmt="%g", delimiter=",")
    np.savetxt(scaled, data[val_idx[:5]] / 16, fmt="%g", delimiter=",")
    proc = run_overt("predict", str(digits_run), str(clean), "--top-k", "2")  # options after the inputs
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == 5 and all(len(x["top"]) == 2 and 0 < x["probability"] <= 1 for x in lines)
    assert "train-serve-skew" not in proc.stderr
    proc = run_overt("predict", str(digits_run), str(clean), "--raw")
    assert len(json.loads(proc.stdout.splitlines()[0])["output"]) == 10  # logits
    report = tmp_path / "report.json"
    proc = run_overt("predict", str(digits_run), str(scaled), "--report", str(report))
    assert proc.returncode == 0 and "OVT610 train-serve-skew" in proc.stderr
    findings = json.loads(report.read_text())["findings"]
    assert findings[0]["slug"] == "train-serve-skew" and findings[0]["details"]["rows"] == [0, 1, 2, 3, 4]
    proc = run_overt("predict", str(digits_run), str(scaled), "--strict")
    assert proc.returncode == 1 and proc.stdout == "" and "--strict" in proc.stderr


def test_the_run_records_schema_statistics_sample_size_and_classes(digits_run):
    record = json.loads((digits_run / "inputs.json").read_text())
    assert record["sample"]["size"] == record["sample"]["of"] == 1438  # the whole split: below the bound
    assert record["schema"] == {"dtype": "float32", "shape": [64]}
    stats = record["stats"]
    assert max(stats["max"]) == 1.0 and min(stats["min"]) == 0.0 and len(stats["std"]) == 64
    assert record["classes"]["count"] == 10 and sum(record["classes"]["distribution"]) == pytest.approx(1.0)
    assert record["preprocessing"]["scale"] == 16.0


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_export_carries_the_preprocessing_and_serves_raw_inputs_like_predict(digits_run, tmp_path, fmt):
    from overt.export import export_run
    from overt.serving import load_exported

    result = export_run(digits_run, fmt, tmp_path / f"model.{fmt}", quiet=True)
    assert result.ok and result.raw and result.same_answers
    data, val_idx = raw_digits()
    served = load_exported(tmp_path / f"model.{fmt}")
    rows = data[val_idx]
    assert_same_answers(served.predict(rows), overt.Predictor.from_run(digits_run, quiet=True).predict(rows))
    assert served.check(rows) == [] and served.check(rows / 16)[0]["kind"] == "scale"


def test_checkpoint_best_last_final(digits_run, capsys):
    from safetensors.torch import load_file

    from overt.predict.predictor import weights_for

    metrics = [json.loads(line) for line in (digits_run / "metrics.jsonl").read_text().splitlines()]
    scored = [(m["val/accuracy"], m["step"]) for m in metrics if "val/accuracy" in m]
    best_step = max(scored, key=lambda t: (t[0], t[1]))[1]
    steps = sorted(p.name for p in (digits_run / "checkpoints").glob("step-*"))
    assert weights_for(digits_run, "final") is None
    assert weights_for(digits_run, "last").name == steps[-1]
    assert weights_for(digits_run, "best").name == f"step-{best_step:06d}"
    assert "the best val/accuracy" in capsys.readouterr().err
    for which, folder in (("best", f"step-{best_step:06d}"), ("last", steps[-1])):
        predictor = overt.Predictor.from_run(digits_run, quiet=True, weights=weights_for(digits_run, which))
        saved = load_file(digits_run / "checkpoints" / folder / "model.safetensors")
        assert all(torch.equal(v, saved[k]) for k, v in predictor.model.state_dict().items())
    final = overt.Predictor.from_run(digits_run, quiet=True)
    assert all(torch.equal(v, load_file(digits_run / "model.safetensors")[k])
               for k, v in final.model.state_dict().items())
    data, val_idx = raw_digits()
    assert overt_main(["export", str(digits_run), "--format", "pt2", "--checkpoint", "last",
                       "--out", str(digits_run.parent / "last.pt2")]) == 0
    assert steps[-1] in capsys.readouterr().err


def test_a_run_without_checkpoints_has_no_best(tmp_path, capsys):
    run = tmp_path / "tiny"
    train("tiny", run, epochs=2)
    assert overt_main(["predict", str(run), "1,2,3,4", "--checkpoint", "best"]) == 2
    assert "holds no checkpoints" in capsys.readouterr().err


def test_a_recipe_without_preprocessing_says_so_and_is_still_checked(tmp_path, capsys):
    recipe = tmp_path / "bare.py"
    recipe.write_text("from overt.recipes import digits\ndefaults = dict(digits.defaults, epochs=2)\n"
                      "def build(cfg):\n    r = digits.build(cfg)\n    r.preprocessing = r.raw_val = None\n"
                      "    return r\n")
    run = tmp_path / "run"
    assert overt_main(["train", str(recipe), f"run_dir={run}", "progress=off", "tensorboard=false",
                       "checkpoint=false"]) == 0
    capsys.readouterr()
    predictor = overt.Predictor.from_run(run)
    assert "this run declares no preprocessing: inputs are given to the model as they are" in capsys.readouterr().err
    data, val_idx = raw_digits()
    answers = predictor.predict(data[val_idx[:20]])  # raw 0..16 rows to a model trained on 0..1: the original bug
    assert predictor.findings and predictor.findings[0].details["kind"] == "scale"
    assert answers[0]["label"] == str(answers[0]["class"])  # classes from the record: class and probability
    assert predictor.predict(data[val_idx[:20]] / 16) and predictor.findings == []


def test_round_trip_train_predict_export_identical_answers_fast(runs, tmp_path):
    """tiny and house-prices (a regression in the target's units): raw inputs through predict and through
    the exported model give identical answers."""
    from overt.export import export_run
    from overt.recipes.base import build_recipe
    from overt.serving import load_exported

    for name in ("tiny", "house-prices"):
        predictor = overt.Predictor.from_run(runs(name), quiet=True)
        raw = list(build_recipe(predictor.module, predictor.config).raw_val)
        result = export_run(runs(name), "onnx", tmp_path / f"{name}.onnx", quiet=True)
        assert result.ok and result.raw and result.same_answers, name
        assert_same_answers(load_exported(tmp_path / f"{name}.onnx").predict(raw), predictor.predict(raw))
    price = overt.Predictor.from_run(runs("house-prices"), quiet=True).predict(raw[:1])[0]["price"]
    assert 50 < price < 1000  # $1000s, the CSV's own units


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sentiment", "mnist", "resnet", "char-rnn"])
def test_round_trip_train_predict_export_identical_answers(runs, tmp_path, name):
    from overt.export import export_run
    from overt.recipes.base import build_recipe
    from overt.serving import load_exported

    predictor = overt.Predictor.from_run(runs(name), quiet=True, raw=name == "char-rnn")
    raw = list(build_recipe(predictor.module, predictor.config).raw_val)[:64]
    result = export_run(runs(name), "onnx", tmp_path / "m.onnx", quiet=True)
    assert result.ok and result.raw and result.same_answers
    served = load_exported(tmp_path / "m.onnx").predict(raw, raw=name == "char-rnn")
    if name == "char-rnn":  # predict samples text; the exported model's logits are compared instead
        eager = predictor.answer(predictor.run_batch(predictor.prepare(raw)))
        assert np.allclose(np.array([s["output"] for s in served]), np.array([e["output"] for e in eager]),
                           atol=1e-4)
    else:
        assert_same_answers(served, predictor.predict(raw))
        flagged = sum(len(f.details["rows"]) for f in predictor.findings)
        assert flagged <= 0.05 * len(raw)  # held-out rows (the runs here train on a few hundred samples)
