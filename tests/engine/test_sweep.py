"""``overt sweep`` / ``overt train -m`` as a whole: stopping and continuing it, one failed run among
others, the sweep's folder, rankings by each run's own monitor, and the grid checked before any run
trains.  Real runs of the digits recipe (tests/checkpoint/kill_recipe.py, which can signal itself at
a chosen forward pass) and of the tiny recipe."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import run_overt

KILL_RECIPE = str(Path(__file__).parents[1] / "checkpoint" / "kill_recipe.py")
PASSES = 45 + 6  # forward passes of one epoch of kill_recipe.py: 45 training micro-batches, 6 validation batches
QUIET = ["progress=off", "tensorboard=false", "metrics_csv=false"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sweep_json(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "sweep.json").read_text())


def only_sweep_dir(root: Path) -> Path:
    (found,) = [p for p in root.iterdir() if "-sweep-" in p.name]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("how,sig,code", [("sweep", "SIGTERM", 143), ("train -m", "SIGINT", 130)])
def test_a_signal_stops_the_whole_sweep_and_the_same_command_continues_it(tmp_path, how, sig, code):
    """Item 1 of issue 34: SIGTERM (or Ctrl-C) stopped only the current run; the sweep trained
    every remaining run and exited 0."""
    runs = tmp_path / "runs"
    command = [*how.split(), KILL_RECIPE, "lr=0.01,0.02,0.03", "epochs=1", f"runs_root={runs}", *QUIET]
    # the signal arrives in the second run, 20 micro-batches into its epoch
    stopped = run_overt(*command, timeout=300, OVERT_TEST_SIGNAL=sig, OVERT_TEST_SIGNAL_AT=str(PASSES + 20))
    assert stopped.returncode == code, stopped.stderr
    sweep_dir = only_sweep_dir(runs)
    assert "continue" in stopped.stderr and "Traceback" not in stopped.stderr
    state = sweep_json(sweep_dir)
    assert state["state"] == "stopped"
    assert [r["status"] for r in state["runs"]] == ["completed", "stopped", "not run"]
    assert not (sweep_dir / "lr=0.03").exists()  # the third run never started
    first = sha(sweep_dir / "lr=0.01" / "model.safetensors")

    again = run_overt(*command, timeout=300)  # the same command, no signal
    assert again.returncode == 0, again.stderr
    assert only_sweep_dir(runs) == sweep_dir  # continued, not a new sweep
    assert "lr=0.01" in again.stderr and "already finished" in again.stderr
    assert "resuming from" in again.stderr
    assert sha(sweep_dir / "lr=0.01" / "model.safetensors") == first  # not retrained
    state = sweep_json(sweep_dir)
    assert state["state"] == "finished"
    assert sorted(r["status"] for r in state["runs"]) == ["completed"] * 3

    # the interrupted run, resumed, ends exactly where an uninterrupted run of it ends
    reference = run_overt("train", KILL_RECIPE, "lr=0.02", "epochs=1", f"run_dir={tmp_path / 'ref'}", *QUIET,
                          timeout=300)
    assert reference.returncode == 0, reference.stderr
    assert sha(sweep_dir / "lr=0.02" / "model.safetensors") == sha(tmp_path / "ref" / "model.safetensors")


def test_sigterm_in_process_stops_the_sweep_with_143(tmp_path, monkeypatch, capsys):
    """The same in one process: the stop is said, the exit status is 128 + SIGTERM, nothing after
    the interrupted run trains; run again, the sweep finishes without retraining the first run."""
    from overt.cli.sweep import main

    monkeypatch.setenv("OVERT_TEST_SIGNAL", "SIGTERM")
    monkeypatch.setenv("OVERT_TEST_SIGNAL_AT", str(PASSES + 20))
    import importlib

    import tests.checkpoint.kill_recipe as kill_recipe

    importlib.reload(kill_recipe)  # its forward-pass count starts at zero
    sweep_dir = tmp_path / "sw"
    argv = ["tests.checkpoint.kill_recipe", "lr=0.01,0.02,0.03", "epochs=1", f"sweep_dir={sweep_dir}", *QUIET]
    assert main(argv) == 143
    err = capsys.readouterr().err
    assert "stopped on SIGTERM" in err and "continue" in err
    assert [r["status"] for r in sweep_json(sweep_dir)["runs"]] == ["completed", "stopped", "not run"]
    monkeypatch.delenv("OVERT_TEST_SIGNAL_AT")
    first = sha(sweep_dir / "lr=0.01" / "model.safetensors")
    assert main(argv) == 0
    assert "already finished" in capsys.readouterr().err
    assert sha(sweep_dir / "lr=0.01" / "model.safetensors") == first
    assert [r["status"] for r in sweep_json(sweep_dir)["runs"]] == ["completed"] * 3


BAD_RECIPE = '''
from overt.recipes import tiny

defaults = dict(tiny.defaults)


def build(cfg):
    recipe = tiny.build(cfg)
    if cfg.lr > 0.05:
        def forward(model, batch):
            return {}["a key the recipe forgot"]
        recipe.forward = forward
    return recipe
'''


def test_a_user_exception_in_one_run_is_one_failed_row(tmp_path, capsys):
    """Item 3: a KeyError in one run aborted the whole sweep with a traceback."""
    from overt.cli.sweep import main

    recipe = tmp_path / "bad_recipe.py"
    recipe.write_text(BAD_RECIPE)
    sweep_dir = tmp_path / "sw"
    code = main([str(recipe), "lr=0.01,0.1,0.02", "epochs=2", "checkpoint=false", f"sweep_dir={sweep_dir}", *QUIET])
    assert code == 1
    captured = capsys.readouterr()
    assert "KeyError" in captured.err and "Traceback" not in captured.err
    assert f"raised at {recipe}:" in captured.err  # where the recipe's code raised; its traceback in a file:
    assert "KeyError" in (sweep_dir / "failed" / "lr=0.1.txt").read_text()
    runs = sweep_json(sweep_dir)["runs"]
    assert [r["overrides"]["lr"] for r in runs if r["error"]] == ["0.1"]
    failed = next(r for r in runs if r["error"])
    assert "KeyError" in failed["error"] and failed["status"] == "failed"
    assert sorted(r["status"] for r in runs) == ["completed", "completed", "failed"]
    assert (sweep_dir / "lr=0.02" / "summary.json").is_file()  # the run after the failed one trained
    md = (sweep_dir / "sweep.md").read_text()
    assert "failed: KeyError" in md and "1 of 3 run(s) failed" in captured.err
    assert (sweep_dir / "report" / "report.md").is_file()


def test_two_sweeps_started_in_the_same_second_get_two_folders(tmp_path, monkeypatch):
    """Item 4: the folder was runs/<recipe>-sweep-<second>, shared by two sweeps of one second."""
    from overt.cli import sweep

    monkeypatch.setattr(sweep, "timestamp", lambda: "20260101-000000")
    args = ["tiny", "lr=0.1,0.01", "epochs=1", "checkpoint=false", f"runs_root={tmp_path}", *QUIET]
    first, _, _ = sweep.run_sweep(args[0], args[1:])
    second, _, _ = sweep.run_sweep(args[0], args[1:])  # the first one finished: this is a new sweep
    assert first != second and first.parent == second.parent == tmp_path
    assert sweep_json(first)["state"] == sweep_json(second)["state"] == "finished"
    for folder in (first, second):
        assert [r["status"] for r in sweep_json(folder)["runs"]] == ["completed", "completed"]


def test_a_swept_monitor_ranks_each_run_by_its_own(tmp_path):
    """Item 4: every run was ranked by the first run's monitor."""
    from overt.cli.sweep import run_sweep

    sweep_dir, trials, _ = run_sweep("tiny", ["monitor=val/loss,val/accuracy", "lr=0.1,0.01", "epochs=2",
                                              "checkpoint=false", f"sweep_dir={tmp_path / 'sw'}", *QUIET])
    md = (sweep_dir / "sweep.md").read_text()
    assert "not comparable" in md
    assert "ranked by val/loss" in md and "ranked by val/accuracy" in md
    runs = sweep_json(sweep_dir)["runs"]
    for r in runs:
        assert r["best"]["metric"] == r["monitor"] == r["overrides"]["monitor"]
    by_monitor: dict[tuple, list] = {}
    for r in runs:
        by_monitor.setdefault((r["monitor"], r["mode"]), []).append(r["best"]["value"])
    assert len(by_monitor) == 2
    for (monitor, mode), values in by_monitor.items():  # each ranked best first by its own monitor and mode
        assert values == sorted(values, reverse=mode == "max")


@pytest.mark.parametrize("overrides,message", [
    ([f"k{i}={','.join(str(v) for v in range(10))}" for i in range(8)], "100,000,000 runs"),
    (["lr=0.1,0.1"], "lr=0.1 twice"),
    (["lr=0.1,1e-1"], "the same run"),
    (["lr=0.1,0.2", "lr=0.3"], "lr is given twice"),
    (["lr=0.1,0.2", "name=mine"], "name"),
    (["lr=0.1,0.2", "epohcs=2"], "epohcs"),
])
def test_the_whole_grid_is_checked_before_anything_trains(tmp_path, capsys, overrides, message):
    """Item 4: a grid of 1e8 runs grew memory to 8 GB with no output; a duplicate or colliding value
    failed only after earlier runs had trained."""
    from overt.cli.sweep import main

    code = main(["tiny", *overrides, "epochs=1", f"runs_root={tmp_path}", *QUIET])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing created, nothing trained


def test_folder_names_never_collide():
    from overt.cli.sweep_grid import folder_names

    combos = [{"ignore": "a/b"}, {"ignore": "a_b"}, {"tag": "X"}, {"tag": "x"}, {"tag": "y" * 300}, {"tag": "y" * 299}]
    names = folder_names(combos)
    assert len({n.casefold() for n in names}) == len(combos)
    assert all(len(n) <= 140 and "/" not in n for n in names)
    assert folder_names([{"lr": "0.1"}]) == ["lr=0.1"]  # a plain value stays readable


def test_a_sweep_whose_recipe_changed_is_not_continued(tmp_path, capsys):
    """Continuing a sweep after its recipe's code changed would rank runs of two versions of the code
    against each other: the same command on a changed recipe is refused in that folder."""
    from overt.cli.sweep import main

    recipe = tmp_path / "recipe.py"
    recipe.write_text("from overt.recipes.tiny import build, defaults  # noqa: F401\n")
    argv = [str(recipe), "lr=0.1,0.01", "epochs=1", "checkpoint=false", f"sweep_dir={tmp_path / 'sw'}", *QUIET]
    assert main(argv) == 0
    assert main(argv) == 0  # the same code: every run is already finished
    assert capsys.readouterr().err.count("already finished") == 2
    recipe.write_text(recipe.read_text() + "# changed\n")
    assert main(argv) == 2
    assert "another version of the recipe" in capsys.readouterr().err
