"""``overt sweep`` / ``overt train -m``: a grid of overrides trained one by one, on tiny runs."""

from __future__ import annotations

import json


def test_sweep_trains_every_combination_and_compares_them(tmp_path, capsys):
    from overt.cli.sweep import main

    code = main(["tiny", "lr=0.1,0.001", "epochs=2", "progress=off", "checkpoint=false", "tensorboard=false",
                 f"sweep_dir={tmp_path / 'sw'}"])
    assert code == 0
    result = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [r["overrides"] for r in result["runs"]] == [{"lr": "0.1"}, {"lr": "0.001"}]  # best first
    values = [r["best"]["value"] for r in result["runs"]]
    assert values == sorted(values, reverse=result["mode"] == "max")
    assert (tmp_path / "sw" / "report" / "report.md").is_file()
    assert (tmp_path / "sw" / "lr=0.1" / "summary.json").is_file()
    assert "| 1 | lr=0.1 |" in capsys.readouterr().out


def test_sweep_checks_every_configuration_before_training(tmp_path, capsys):
    from overt.cli import main

    code = main(["train", "-m", "tiny", "lr=0.1,0.01", "epohcs=2", f"sweep_dir={tmp_path / 'sw'}"])
    assert code == 2
    assert "epohcs" in capsys.readouterr().err
    assert not (tmp_path / "sw").exists()


def test_sweep_grid_keeps_bracketed_values_whole():
    from overt.cli.sweep_grid import grid

    fixed, combos = grid(["a=1,2", "ignore=[graph-leak,dead-activations]", "b=x,y", "c=3"])
    assert fixed == ["ignore=[graph-leak,dead-activations]", "c=3"]
    assert combos == [{"a": "1", "b": "x"}, {"a": "1", "b": "y"}, {"a": "2", "b": "x"}, {"a": "2", "b": "y"}]


def test_sweep_dir_naming_a_file_is_a_clear_error(tmp_path, capsys):
    from overt.cli import main

    (tmp_path / "file").write_text("x")
    assert main(["sweep", "tiny", "lr=0.1,0.01", f"sweep_dir={tmp_path / 'file'}"]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "Traceback" not in err
