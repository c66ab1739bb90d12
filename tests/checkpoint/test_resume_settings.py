"""Which config changes ``overt resume`` reports: exactly the keys that affect the result, as
each TrainConfig field declares it (``overt.config.affects_result``)."""

from __future__ import annotations

from overt.cli.resume import main as resume
from overt.cli.train import main as train
from overt.config import TrainConfig, affects_result, config_class, sections


def test_every_engine_setting_declares_its_section_and_whether_it_affects_the_result():
    undeclared = [k for k, info in TrainConfig.model_fields.items()
                  if not isinstance(info.json_schema_extra, dict)
                  or not isinstance(info.json_schema_extra.get("section"), str)
                  or not isinstance(info.json_schema_extra.get("affects_result"), bool)]
    assert undeclared == []
    assert sorted(k for keys in sections().values() for k in keys) == sorted(TrainConfig.model_fields)


def test_what_affects_the_result():
    assert [affects_result(k) for k in ("lr", "seed", "batch_size", "precision")] == [True] * 4  # lr: a recipe's
    assert [affects_result(k) for k in ("persistent_workers", "prefetch_factor", "log_grad_norms", "progress")] == [
        False] * 4
    # a recipe that changes an engine default keeps the field's marks
    assert config_class({"epochs": 3}).model_fields["epochs"].json_schema_extra == \
        TrainConfig.model_fields["epochs"].json_schema_extra


def test_resume_reports_changed_settings_only_for_keys_that_affect_the_result(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train(["digits", f"run_dir={run_dir}", "epochs=1", "num_workers=1", "progress=off",
                  "tensorboard=false"]) == 0
    capsys.readouterr()
    # without its final weights the finished run is resumed (from its last checkpoint) rather than left as it is
    (run_dir / "model.safetensors").unlink()
    assert resume([str(run_dir), "persistent_workers=true", "prefetch_factor=4", "log_grad_norms=true"]) == 0
    err = capsys.readouterr().err
    assert "resuming from" in err and "changed settings" not in err
    (run_dir / "model.safetensors").unlink()
    assert resume([str(run_dir), "dropout=0.2"]) == 0  # (a changed lr is refused: the run has a scheduler)
    err = capsys.readouterr().err
    assert "changed settings" in err and "dropout: 0.1 -> 0.2" in err
