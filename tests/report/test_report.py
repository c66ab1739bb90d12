"""`overt report` on real short runs: plots, the markdown report, comparison, CSV, and runs that
did not finish (failed, killed)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys

import pytest

from overt.report import write_report
from overt.run.reader import read_metrics, read_run
from tests.conftest import REPO, run_overt
from tests.report.conftest import png_size, train_recipe, train_run


def test_plots_and_report_for_a_finished_run(finished_run, tmp_path):
    result = write_report([finished_run], tmp_path / "out")
    names = {p.name for p in result.plots}
    assert {"overview.png", "loss.png", "accuracy.png", "lr.png", "samples_per_sec.png"} <= names
    for path in result.plots:
        assert path.stat().st_size > 5_000, path
        width, height = png_size(path)
        assert 400 <= width <= 2000 and 300 <= height <= 2000, (path.name, width, height)
    text = result.markdown.read_text()
    summary = json.loads((finished_run / "summary.json").read_text())
    assert "| status | completed |" in text
    best = summary["best"]
    assert f"val/accuracy = {best['value']:.4g} at step {best['step']}" in text
    assert f"| final val/loss | {summary['final']['val/loss']:.4g} |" in text
    assert "| guard findings | 0 |" in text
    assert "lr: 0.003" in text  # the config
    for path in result.plots:
        assert f"![{path.stem}]({path.name})" in text


def test_two_runs_compared_name_lr_as_the_differing_key(finished_run, other_lr_run, tmp_path):
    proc = run_overt("report", str(finished_run), str(other_lr_run), "--out", str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "cmp" / "report.md").read_text()
    section = text.split("## Config keys that differ", 1)[1].split("##", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| key")]
    assert rows == ["| lr | 0.003 | 0.01 |"]
    assert "|  | digits-a | digits-b |" in text
    for run in (finished_run, other_lr_run):
        best = json.loads((run / "summary.json").read_text())["best"]
        assert f"val/accuracy = {best['value']:.4g} at step {best['step']}" in text
    assert png_size(tmp_path / "cmp" / "overview.png")[0] > 600


def test_csv_export_has_every_logged_record(finished_run, tmp_path):
    result = write_report([finished_run], tmp_path / "out", csv=True)
    with open(result.csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    records = read_metrics(finished_run / "metrics.jsonl")
    assert len(rows) == len(records)
    assert rows[0].keys() >= {"run", "step", "epoch", "train/loss", "val/accuracy"}
    for row, record in zip(rows, records):
        assert row["run"] == "digits-a" and int(row["step"]) == record["step"]
        for key, value in record.items():
            assert float(row[key]) == pytest.approx(value)


def test_report_on_a_failed_run_shows_the_error_and_the_metrics_so_far(tmp_path, digits):
    calls = [0]

    def forward(model, batch):
        calls[0] += 1
        if calls[0] == 35:  # in the second epoch (23 batches of 64 + 3 validation batches each)
            raise RuntimeError("disk on fire")
        inputs, target = batch
        return model(inputs), target

    with pytest.raises(Exception, match="disk on fire"):
        train_run(tmp_path / "run", digits, forward=forward)
    result = write_report([tmp_path / "run"], tmp_path / "out")
    text = result.markdown.read_text()
    assert "failed at epoch 2, step" in text and "disk on fire" in text
    assert "| epochs | 1 |" in text  # one epoch finished
    assert (tmp_path / "out" / "loss.png").stat().st_size > 0


def test_report_on_a_run_killed_mid_way(tmp_path):
    run_dir = tmp_path / "killed"
    recipe = REPO / "tests" / "checkpoint" / "kill_recipe.py"
    proc = run_overt("train", str(recipe), f"run_dir={run_dir}", "log_every=5", OVERT_TEST_SIGNAL_AT="80")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with open(run_dir / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 99, "train/lo')  # as if killed in the middle of a write
    run = read_run(run_dir)
    assert run.state == "ended abruptly" and run.summary is None  # it says running; no process holds it
    assert run.progress() == (1, max(r["step"] for r in run.metrics))
    result = write_report([run_dir], csv=True)
    assert result.markdown == run_dir / "report" / "report.md"
    text = result.markdown.read_text()
    assert "ended abruptly: no summary.json and no process holds the run (killed" in text
    assert "| epochs | 1 |" in text and "best | val/accuracy = " in text
    assert "| guard findings | – |" in text and "none recorded" in text  # unknown, not "0"
    assert {"overview.png", "loss.png"} <= {p.name for p in result.plots}

    from overt.run.rundir import RunDir

    with RunDir(run_dir).lock():  # as a process training it would
        assert read_run(run_dir).state == "running"
        assert "running: pid " in write_report([run_dir]).markdown.read_text()


def test_without_matplotlib_the_tables_are_still_written_and_the_extra_is_named(finished_run, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from overt.cli import main; "
            f"sys.exit(main(['report', {str(finished_run)!r}, '--out', {str(tmp_path / 'out')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "matplotlib is not installed" in proc.stderr and "pip install 'overt[plots]'" in proc.stderr
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| status | completed |" in text and "Plots skipped" in text
    assert not list((tmp_path / "out").glob("*.png"))


def test_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path):
    proc = run_overt("report", str(tmp_path))
    assert proc.returncode == 2
    assert "is not a run directory" in proc.stderr and "Traceback" not in proc.stderr


def test_plots_true_draws_the_plots_into_the_run_directory_at_the_end(tmp_path):
    summary = train_recipe(tmp_path / "run", "plots=true")
    plots = tmp_path / "run" / "plots"
    assert summary["plots"] == str(plots)
    for name in ("overview.png", "loss.png", "accuracy.png", "lr.png"):
        assert png_size(plots / name)[0] >= 400, name


def test_plots_true_without_matplotlib_refuses_to_start_and_names_the_extra(tmp_path, monkeypatch):
    from overt.errors import OvertError

    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    with pytest.raises(OvertError, match="matplotlib is not installed") as info:
        train_recipe(tmp_path / "run", "plots=true")
    assert "pip install 'overt[plots]'" in str(info.value)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_run_stopped_by_a_guard_shows_the_finding(tmp_path, digits):
    def forward(model, batch):
        inputs, target = batch
        return model(inputs) * float("nan"), target  # a NaN loss from the first step

    with pytest.raises(Exception, match="non-finite"):
        train_run(tmp_path / "run", digits, forward=forward)
    text = write_report([tmp_path / "run"], tmp_path / "out").markdown.read_text()
    assert "| status | failed |" in text and "| guard findings | 1 |" in text
    from overt.catalog import lookup

    assert f"**{lookup('non-finite').code} non-finite** [error]" in text.split("## Guard findings", 1)[1]


def test_a_throughput_spike_does_not_flatten_its_panel_and_is_counted():
    from matplotlib.figure import Figure

    from overt.report.plots import _robust_limits

    ax = Figure().subplots()
    values = [900.0 + 10 * (i % 7) for i in range(30)] + [40_000.0]  # one pause or busy second
    ax.plot(range(len(values)), values)
    _robust_limits(ax, values)
    assert ax.get_ylim()[1] < 2_000  # the bulk fills the panel
    assert any("1 point(s) above the axis, up to 4e+04" in t.get_text() for t in ax.texts)
    steady = Figure().subplots()
    _robust_limits(steady, values[:30])
    assert not steady.texts  # no spike: matplotlib's own limits


def test_runs_written_with_epochs_from_0_read_with_epochs_from_1(tmp_path):
    """metrics.jsonl counts epochs from 1 (as the console); a run written before that is read the same way."""
    run = tmp_path / "old"
    run.mkdir()
    lines = [{"step": 5, "epoch": 0, "train/loss": 1.0, "train/lr": 0.1}, {"step": 10, "epoch": 0, "val/loss": 0.9},
             {"step": 20, "epoch": 1, "val/loss": 0.8}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run / "config.yaml").write_text("recipe: digits\n")
    record = read_run(run)
    assert [r["epoch"] for r in record.epoch_records] == [1, 2] and record.progress()[0] == 2


def _drawn(runs, name):
    """The matplotlib axes of panel ``name`` drawn for ``runs`` (real runs read from their folders)."""
    from matplotlib.figure import Figure

    from overt.report.plots import draw_panel
    from overt.report.series import panels, run_labels

    records = [read_run(r) for r in runs]
    panel = next(p for p in panels(records) if p.name == name)
    ax = Figure().subplots()
    draw_panel(ax, panel, records, run_labels(records))
    return ax


def test_an_overlay_names_each_run_once_and_each_line_style_once(finished_run, other_lr_run):
    """Two runs' loss panel: a legend of runs (colour) and of metrics (line style), not of every pair;
    the accuracy panel gives each run's best value; one epoch axis fits both (same epoch ends)."""
    ax = _drawn([finished_run, other_lr_run], "loss")
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["digits-a", "digits-b", "train/loss", "train/epoch_loss", "val/loss"]
    ax = _drawn([finished_run, other_lr_run], "accuracy")
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    for run, text in zip((finished_run, other_lr_run), texts):
        best = json.loads((run / "summary.json").read_text())["best"]
        assert text == f"{run.name}  best {best['value']:.4g} (step {best['step']})"
    assert texts[-1] == "best of each run"
    assert ax.get_yscale() == "linear" and len(ax.child_axes) == 1  # the epoch axis


def test_learning_rates_a_decade_apart_share_a_log_axis_that_says_so(finished_run, other_lr_run, tmp_path):
    """lr 0.003 against 0.03: on a linear axis the smaller schedule is a flat line at zero."""
    tenfold = tmp_path / "digits-c"
    train_recipe(tenfold, "lr=0.03")
    ax = _drawn([finished_run, tenfold], "lr")
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "lr (log scale)"
    ax = _drawn([finished_run, other_lr_run], "lr")  # 0.003 against 0.01: linear is readable
    assert ax.get_yscale() == "linear" and ax.get_ylabel() == "lr"
    assert _drawn([finished_run, tenfold], "accuracy").get_yscale() == "linear"  # bounded metrics never


def test_every_panel_spans_the_same_steps_and_the_epoch_axis_has_whole_epochs_only(tmp_path):
    """A panel with one logged point (lr at step 50 of a 90-step run) spans the run's steps like the
    others, and its epoch axis shows whole epochs (it showed 1.05, 1.065, ... around the point)."""
    run = tmp_path / "sparse"
    train_recipe(run, "log_every=50")
    assert len(read_run(run).metrics) == 3  # epoch 1 end, step 50, epoch 2 end
    limits = {name: _drawn([run], name).get_xlim() for name in ("loss", "lr", "accuracy")}
    assert len(set(limits.values())) == 1
    for name in ("loss", "lr"):
        top = _drawn([run], name).child_axes[0]
        ticks = list(top.xaxis.get_major_locator()())
        assert ticks and all(t == int(t) for t in ticks), ticks


def test_more_lines_than_matplotlib_has_cycle_colours_get_distinct_colours():
    from overt.report.plots import run_colours

    assert run_colours(3) == ["C0", "C1", "C2"]
    many = run_colours(12)
    assert len({tuple(c) for c in many}) == 12


def test_a_run_drawn_exactly_over_another_says_so_in_the_legend(finished_run, tmp_path):
    """Two runs with the same schedule (a sweep over hidden= at one lr): the second line covers the
    first, and the legend says so instead of listing a colour that cannot be seen."""
    import shutil

    twin = tmp_path / "digits-twin"
    shutil.copytree(finished_run, twin)
    texts = [t.get_text() for t in _drawn([finished_run, twin], "lr").get_legend().get_texts()]
    assert texts == ["digits-a", "digits-twin  (drawn over digits-a: the same values)"]
