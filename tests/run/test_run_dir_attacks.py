"""The run directory as an attack surface: a run directory can come from anywhere, so a name in it
may be a planted symbolic link, and a run's name comes from the command line.  No write follows a
link out of the run directory (temporary files are created exclusively under random names, a
linked sub-folder is refused with a clear error), no name leaves the runs folder, and overt never
advises deleting a folder it did not write."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from overt.cli import main as overt_main
from overt.errors import OvertError


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A finished tiny run with TensorBoard events and checkpoints (shared: tests copy it)."""
    run = tmp_path_factory.mktemp("attacks") / "run"
    assert overt_main(["train", "tiny", f"run_dir={run}", "epochs=2", "progress=off", "tensorboard=true",
                       "guards=false"]) == 0
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    return copy


def _outside(tmp_path: Path) -> tuple[Path, Path]:
    """A folder outside the run directory and a file in it that must never change."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "victim.txt"
    victim.write_text("precious\n")
    return elsewhere, victim


def _untouched(elsewhere: Path, victim: Path) -> None:
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim.txt"]


# -- every atomic write -----------------------------------------------------------------------------

def test_an_atomic_write_never_follows_a_planted_temporary_name(tmp_path):
    """The temporary file used to be ``.NAME.tmp-<pid>``: 400 links planted for the likely pids
    overwrote a file elsewhere.  Temporaries are now random and created exclusively."""
    from overt.run.atomic import atomic_path, write_text_atomic

    elsewhere, victim = _outside(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    pid = os.getpid()
    for guess in range(max(1, pid - 200), pid + 200):
        (run / f".status.json.tmp-{guess}").symlink_to(victim)
    write_text_atomic(run / "status.json", '{"status": "running"}\n')
    with atomic_path(run / "model.safetensors") as tmp:
        assert not tmp.is_symlink() and tmp.stat().st_size == 0
        tmp.write_bytes(b"weights")
    _untouched(elsewhere, victim)
    assert (run / "status.json").read_text() == '{"status": "running"}\n'
    assert (run / "model.safetensors").read_bytes() == b"weights"


@pytest.mark.parametrize("name", ["status.json", "summary.json", "config.yaml", "guards.json"])
def test_a_file_planted_as_a_link_is_replaced_not_followed(tmp_path, name):
    from overt.run.rundir import RunDir

    elsewhere, victim = _outside(tmp_path)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    (run.path / name).symlink_to(victim)
    run.write_json(run.path / name, {"status": "completed"})
    _untouched(elsewhere, victim)
    assert not (run.path / name).is_symlink() and "completed" in (run.path / name).read_text()


def test_a_linked_metrics_log_is_refused(tmp_path):
    from overt.run.rundir import RunDir, UnsafePathError

    elsewhere, victim = _outside(tmp_path)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.metrics.symlink_to(victim)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        os.close(run.open_append(run.metrics))
    _untouched(elsewhere, victim)


@pytest.mark.parametrize("folder", ["report", "tb", "plots", "checkpoints", "report/sub"])
def test_a_linked_sub_folder_is_refused(tmp_path, folder):
    from overt.run.rundir import RunDir, UnsafePathError

    elsewhere, victim = _outside(tmp_path)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    top = folder.split("/")[0]
    (run.path / top).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePathError, match=f"{top} is a symbolic link") as caught:
        run.folder(folder)
    assert f"rm {run.path / top}" in caught.value.fix
    with pytest.raises(UnsafePathError):
        run.write_text(run.path / folder / "x.txt", "x")
    _untouched(elsewhere, victim)


# -- the commands ------------------------------------------------------------------------------------

def test_overt_report_through_a_linked_report_folder_or_files(tiny_run, tmp_path, capsys):
    elsewhere, victim = _outside(tmp_path)
    run = _copy(tiny_run, tmp_path)
    (run / "report").symlink_to(elsewhere, target_is_directory=True)
    assert overt_main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert "report is a symbolic link" in err and "Traceback" not in err
    _untouched(elsewhere, victim)
    # a real report/ folder whose files are planted links: replaced, never written through
    (run / "report").unlink()
    (run / "report").mkdir()
    for name in ("report.md", "overview.png", "loss.png", "metrics.csv"):
        (run / "report" / name).symlink_to(victim)
    assert overt_main(["report", str(run), "--csv"]) == 0
    _untouched(elsewhere, victim)
    assert not (run / "report" / "report.md").is_symlink() and (run / "report" / "report.md").stat().st_size > 0


@pytest.mark.parametrize("fmt", ["pt2", "onnx"])
def test_overt_export_through_a_planted_model_file(tiny_run, tmp_path, capsys, fmt):
    pytest.importorskip("onnxruntime") if fmt == "onnx" else None
    elsewhere, victim = _outside(tmp_path)
    run = _copy(tiny_run, tmp_path)
    (run / f"model.{fmt}").symlink_to(victim)
    (run / "model.serving.json").symlink_to(elsewhere / "serving.json")
    assert overt_main(["export", str(run), "--format", fmt]) == 0, capsys.readouterr().err
    _untouched(elsewhere, victim)
    assert not (run / f"model.{fmt}").is_symlink() and (run / f"model.{fmt}").stat().st_size > 0


@pytest.mark.parametrize("folder", ["tb", "plots", "checkpoints"])
def test_overt_resume_refuses_a_linked_folder_before_training(tiny_run, tmp_path, capsys, folder):
    elsewhere, victim = _outside(tmp_path)
    run = _copy(tiny_run, tmp_path)
    if folder == "checkpoints":  # the checkpoints are read from elsewhere; new ones must not be written there
        shutil.move(run / "checkpoints", elsewhere / "ckpts")
        (run / "checkpoints").symlink_to(elsewhere / "ckpts", target_is_directory=True)
        before = sorted(p.name for p in (elsewhere / "ckpts").iterdir())
    else:
        shutil.rmtree(run / folder, ignore_errors=True)
        (run / folder).symlink_to(elsewhere, target_is_directory=True)
    code = overt_main(["resume", str(run), "epochs=3", "tensorboard=true", "plots=true"])
    err = capsys.readouterr().err
    said = "belongs to another run" if folder == "checkpoints" else f"{folder} is a symbolic link"
    assert code == 2 and said in err and "Traceback" not in err, err
    if folder == "checkpoints":
        assert sorted(p.name for p in (elsewhere / "ckpts").iterdir()) == before
        shutil.rmtree(elsewhere / "ckpts")
    _untouched(elsewhere, victim)


@pytest.mark.parametrize("folder", ["checkpoints", "tb", "plots"])
def test_a_trainer_refuses_a_linked_folder_before_its_first_step(tmp_path, folder):
    import torch

    import overt
    from overt.recipes.digits import DigitsMLP, load_digits_split
    from overt.run.rundir import UnsafePathError

    elsewhere, victim = _outside(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / folder).symlink_to(elsewhere, target_is_directory=True)
    train_ds, val_ds = load_digits_split(0.2, 0)
    model = DigitsMLP(32, 0.0)
    trainer = overt.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                            train_ds, val_ds, run_dir=run, epochs=1, progress="off", tensorboard=True,
                            plots=True, guards=False)
    with pytest.raises(UnsafePathError, match=f"{folder} is a symbolic link"):
        trainer.fit()
    assert trainer.state.global_step == 0
    _untouched(elsewhere, victim)


# -- names -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../x", "..", ".", "a/b", "/abs", "x/../../y"])
def test_a_name_that_leaves_the_runs_folder_is_refused(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "deep" / "runs"
    runs.mkdir(parents=True)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert overt_main(["train", "tiny", f"runs_root={runs}", f"name={name}", "epochs=1", "progress=off"]) == 2
    err = capsys.readouterr().err
    assert "is not a folder name" in err and "Traceback" not in err and "rm -r" not in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written anywhere


@pytest.mark.parametrize("where", ["home", "cwd", "root"])
def test_no_advice_to_delete_a_folder_overt_did_not_write(tmp_path, capsys, monkeypatch, where):
    home = tmp_path / "home"
    home.mkdir()
    for name in ("notes.txt", "config.yaml", "status.json"):  # even files that look like a run's
        (home / name).write_text("{}\n" if name.endswith("json") else "recipe: tiny\n")
    monkeypatch.chdir(home)
    target = {"home": str(home), "cwd": ".", "root": "/"}[where]
    assert overt_main(["train", "tiny", f"run_dir={target}", "epochs=1", "progress=off"]) == 2
    err = capsys.readouterr().err
    assert "rm -r" not in err and "delete the folder" not in err and "Traceback" not in err, err
    assert "another name= or run_dir=" in err
    if where != "root":
        assert sorted(p.name for p in home.iterdir()) == ["config.yaml", "notes.txt", "status.json"]
        assert overt_main(["resume", target]) == 2  # config.yaml but no checkpoint: no rm advice either
        err = capsys.readouterr().err
        assert "rm -r" not in err and "Traceback" not in err, err
        assert not (home / ".lock").exists()  # and no lock file left to make it look like overt's


def test_a_run_overt_wrote_still_gets_the_advice(tmp_path, capsys):
    run = tmp_path / "run"
    assert overt_main(["train", "tiny", f"run_dir={run}", "epochs=1", "progress=off", "checkpoint=false",
                       "guards=false"]) == 0
    (run / "summary.json").unlink()
    (run / "status.json").write_text('{"status": "failed"}\n')
    assert overt_main(["train", "tiny", f"run_dir={run}", "epochs=1", "progress=off"]) == 2
    assert f"rm -r {run}" in capsys.readouterr().err


def test_the_unsafe_path_error_is_an_overt_error():
    from overt.run.rundir import UnsafePathError

    assert issubclass(UnsafePathError, OvertError)
