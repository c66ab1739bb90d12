"""`overt report` on damaged, hostile or odd run directories: a clear error or a correct report,
never a traceback or a hang (issue 26)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    from overt.cli.train import main as train

    run_dir = tmp_path_factory.mktemp("report-bad") / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=1", "progress=off", "tensorboard=false",
                  "guards=false", "checkpoint=false"]) == 0
    return run_dir


def _report(run: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "overt", "report", str(run), *extra], capture_output=True,
                          text=True, env=env, timeout=300, cwd=REPO)


def _copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    return run


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


CASES = {
    "nan best": lambda run: _edit_json(run / "summary.json",
                                       best={"metric": "val/loss", "mode": "min", "value": "nan", "step": 3}),
    "inf metric": lambda run: (run / "metrics.jsonl").write_text(
        (run / "metrics.jsonl").read_text() + json.dumps({"step": 99, "epoch": 0, "val/loss": "inf"}) + "\n"),
    "non-numeric step": lambda run: (run / "metrics.jsonl").write_text(
        json.dumps({"step": "abc", "epoch": 0, "train/loss": 1.0}) + "\n" + (run / "metrics.jsonl").read_text()),
    "binary metrics": lambda run: (run / "metrics.jsonl").write_bytes(os.urandom(4096) + b"\n\xff\xfe{\n"),
    "metrics json list": lambda run: (run / "metrics.jsonl").write_text("[1, 2]\n{\"step\": {}}\n\"x\"\n"),
    "summary wrong types": lambda run: _edit_json(run / "summary.json", status=3, epochs="many", steps=[1],
                                                  final="none", best=[1], findings={"a": 1}),
    "summary a list": lambda run: (run / "summary.json").write_text("[]"),
    "status wrong types": lambda run: (run / "status.json").write_text(json.dumps({"status": ["x"], "step": "s"})),
    "guards wrong types": lambda run: ((run / "summary.json").unlink(),
                                       (run / "guards.json").write_text(json.dumps({"findings": "lots"}))),
    "bad yaml": lambda run: (run / "config.yaml").write_text("a: [1, 2\nb: }\n"),
    "yaml alias bomb": lambda run: (run / "config.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
            f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))),
    "yaml python tag": lambda run: (run / "config.yaml").write_text("x: !!python/object/apply:os.system ['true']\n"),
    "fifo metrics": lambda run: ((run / "metrics.jsonl").unlink(), os.mkfifo(run / "metrics.jsonl")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_run_file_gives_a_report_and_names_the_problem(finished, tmp_path, case):
    run = _copy(finished, tmp_path)
    CASES[case](run)
    done = _report(run)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = (run / "report" / "report.md").read_text()
    assert "# overt report" in report
    if case not in ("nan best", "inf metric"):
        assert "overt report: warning:" in done.stderr, done.stderr
        assert "## Files that could not be read" in report


def test_a_nan_best_value_is_reported_as_nan(finished, tmp_path):
    run = _copy(finished, tmp_path)
    CASES["nan best"](run)
    done = _report(run)
    assert done.returncode == 0, done.stderr
    assert "val/loss = nan at step 3" in (run / "report" / "report.md").read_text()


@pytest.mark.parametrize("kind", ["a file", "read-only"])
def test_an_unwritable_out_is_a_clear_error(finished, tmp_path, kind):
    run = _copy(finished, tmp_path)
    out = tmp_path / "out"
    if kind == "a file":
        out.write_text("x")
        target = out / "sub"
    else:
        out.mkdir()
        out.chmod(0o500)
        target = out / "sub"
        if os.access(out, os.W_OK):  # root ignores permissions
            pytest.skip("running as root: a read-only folder is writable")
    done = _report(run, "--out", str(target))
    assert done.returncode == 2, done.stderr
    assert "cannot write the report to" in done.stderr and "Traceback" not in done.stderr


def test_a_run_being_resumed_is_not_called_completed(finished, tmp_path):
    from overt.run.reader import read_run

    run = _copy(finished, tmp_path)
    assert read_run(run).state == "completed"
    code = ("import sys, time; from overt.run.rundir import RunDir; RunDir(sys.argv[1]).lock().acquire(); "
            "print('held', flush=True); time.sleep(600)")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    holder = subprocess.Popen([sys.executable, "-c", code, str(run)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # as `overt resume` holds it while it extends the run
        assert read_run(run).state == "running"
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert read_run(run).state == "completed"
