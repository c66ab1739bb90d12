"""The run directory's layout: names, checkpoint folders and strict, atomic JSON, in one module."""

from __future__ import annotations

import json
import math

import pytest

from overt.run import layout


def test_checkpoint_names_are_built_and_read_back_in_one_place(tmp_path):
    assert layout.checkpoint_name(120) == "step-000120"
    assert layout.checkpoint_step("step-000120") == 120
    assert layout.checkpoint_step("step-1234567") == 1234567
    for other in ("step-000120.bad", ".tmp-step-000120-1-2", "step-", "model.safetensors"):
        assert layout.checkpoint_step(other) is None
    run = tmp_path / "run"
    from overt.run.rundir import RunDir

    assert RunDir.of(run / layout.CHECKPOINTS / "step-000004").path == run
    assert RunDir.of(run).path == run and RunDir(run).checkpoint(4) == run / layout.CHECKPOINTS / "step-000004"
    assert layout.checkpoint_root(run) == run  # no checkpoints/ yet: the path itself
    (run / layout.CHECKPOINTS).mkdir(parents=True)
    assert layout.checkpoint_root(run) == run / layout.CHECKPOINTS


def test_json_is_strict_and_reads_back_non_finite_values(tmp_path):
    path = tmp_path / "x.json"
    layout.write_json(path, {"loss": math.nan, "up": math.inf, "down": -math.inf, 3: [1.5, math.nan]})
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text and text.endswith("\n")
    data = json.loads(text)
    assert data == {"loss": "nan", "up": "inf", "down": "-inf", "3": [1.5, "nan"]}
    assert math.isnan(layout.NON_FINITE[data["loss"]]) and layout.NON_FINITE[data["down"]] == -math.inf
    assert not [p for p in tmp_path.iterdir() if p.name != "x.json"]  # no temporary file left behind


def test_write_json_leaves_the_old_file_when_the_value_cannot_be_written(tmp_path):
    path = tmp_path / "x.json"
    layout.write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        layout.write_json(path, {"a": object()}, default=None)
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_guards_report_is_written_atomically_as_strict_json(tmp_path):
    from overt.findings import Finding
    from overt.guards.options import GuardOptions
    from overt.guards.report import Reporter

    import io

    reporter = Reporter(GuardOptions(stream=io.StringIO()))
    reporter.add(Finding("non-finite", "the loss is nan", where="train.py:3", details={"value": float("nan")}))
    target = tmp_path / "run" / layout.GUARDS
    reporter.write(target)
    data = json.loads(target.read_text())
    assert [f["slug"] for f in data["findings"]] == ["non-finite"]
    assert data["findings"][0]["details"] == {"value": "nan"}
    assert sorted(p.name for p in target.parent.iterdir()) == [layout.GUARDS]


def test_weight_files_get_the_mode_of_the_other_run_files(tmp_path):
    """safetensors writes 0600 files; a run's weights are as readable as its other files (0644 less the umask)."""
    import os

    from overt.cli.train import main as train

    run = tmp_path / "run"
    assert train(["tiny", f"run_dir={run}", "epochs=1", "progress=off", "tensorboard=false"]) == 0
    mask = os.umask(0o022)
    os.umask(mask)
    expected = 0o644 & ~mask
    weights = [run / "model.safetensors", *run.glob("checkpoints/*/*.safetensors")]
    assert len(weights) >= 3
    assert {p.stat().st_mode & 0o777 for p in weights} == {expected} == {(run / "config.yaml").stat().st_mode & 0o777}
