"""`overt resume` errors a user can act on (in-process: no training needed)."""

from __future__ import annotations

from overt.cli.resume import main


def test_resume_of_a_missing_directory_says_so(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "overt resume: error:" in err and "does not exist" in err and "Traceback" not in err


def test_resume_of_a_run_without_checkpoints_says_how_to_start_again(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("recipe: digits\n")
    assert main([str(tmp_path / "run")]) == 2  # a folder overt did not write: never advised for deletion
    err = capsys.readouterr().err
    assert "has no checkpoint to continue from" in err and "rm -r" not in err and "a new folder" in err
    (tmp_path / "run" / "status.json").write_text('{"status": "failed"}\n')  # a run overt wrote:
    (tmp_path / "run" / ".lock").write_text("")  # its status and the lock file overt creates when it claims one
    assert main([str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "has no checkpoint to continue from" in err and f"rm -r {tmp_path / 'run'}" in err
    assert "overt resume" not in err.split("fix:")[1]  # never sends the user back and forth


def test_resume_of_a_finished_run(tmp_path, capsys):
    from overt.cli.train import main as train

    run_dir = tmp_path / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=1", "progress=off", "tensorboard=false"]) == 0
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert before == ["step-000045"]
    # a schedule of fixed length (OneCycleLR) cannot be stretched: refused before training, with the reason
    assert main([str(run_dir), "epochs=2"]) == 2
    err = capsys.readouterr().err
    assert "changed settings" in err and "epochs: 1 -> 2" in err
    assert "the saved OneCycleLR schedule covers 45 optimizer steps; the resumed run now has 90" in err
    # as saved: nothing left to do, nothing rewritten
    assert main([str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert "is finished (it trained all 1 epoch(s);" in err and "resuming from" not in err
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before
