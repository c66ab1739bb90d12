"""The doctor on framework projects: a LightningModule + DataModule and an HF Trainer, with the
framework's own loss -- the same probes and readiness note."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lightning")
pytest.importorskip("transformers")

from overt.doctor.frameworks import hf_inputs, inputs_for, lightning_inputs  # noqa: E402
from tests.integrations.projects import hf_digits, lightning_digits  # noqa: E402

FAST = dict(overfit_steps=60, overfit_time_s=600,  # steps decide, not how busy the machine is
            throughput_steps=5, throughput_time_s=0.5, progress=False)


def test_lightning_project_from_the_command_line_writes_its_note(tmp_path, capsys):
    from overt.cli import main

    out = tmp_path / "note"
    code = main(["doctor", f"{lightning_digits.__file__}:project", "loss_kind=cross_entropy", f"out={out}",
                 "overfit_steps=60", "overfit_time_s=600", "throughput_steps=5", "throughput_time_s=0.5", "--quiet"])
    assert code == 0, capsys.readouterr().err
    note = json.loads((out / "readiness.json").read_text())
    verdicts = note["verdicts"]
    assert verdicts["initial-loss"] == "pass" and verdicts["overfit-batch"] == "pass"
    assert verdicts["checkpoint"] == "pass" and verdicts["determinism"] == "pass"
    assert "DigitsModule + DigitsData" in (out / "readiness.md").read_text()


def test_lightning_training_step_is_the_loss_and_a_planted_bug_fails():
    inputs = lightning_inputs(lightning_digits.DigitsModule("frozen-mismatch"), lightning_digits.DigitsData())
    readiness = inputs.doctor(**FAST)
    assert readiness.verdicts["optimizer"] == "fail"
    assert "params-not-optimized" in {f.slug for f in readiness.findings}
    assert inputs.settings["batch_size"] == 32  # the DataModule's loader


def test_overt_doctor_takes_a_lightning_module_and_datamodule():
    import overt

    readiness = overt.doctor(lightning_digits.DigitsModule(), lightning_digits.DigitsData(),
                             loss_kind="cross_entropy", only=["data", "initial-loss", "optimizer"], progress=False)
    assert readiness.verdicts == {"data": "pass", "initial-loss": "pass", "optimizer": "pass"}
    assert readiness["initial-loss"].evidence["classes"] == 10


def test_lightning_manual_optimisation_is_a_clear_error():
    from overt.errors import ConfigError

    with pytest.raises(ConfigError, match="manual optimisation"):
        lightning_inputs(lightning_digits.DigitsModule("manual-no-zero-grad"), lightning_digits.DigitsData())


def test_hf_trainer_with_its_own_loss_is_ready(tmp_path):
    trainer = hf_digits.build(None, out_dir=str(tmp_path))
    readiness = inputs_for(trainer, loss_kind="cross_entropy").doctor(**FAST)
    assert readiness.passed, readiness.to_markdown()  # (per-sample indexing of a datasets.Dataset may warn
    # that data loading takes much of each step: the throughput probe's own judgement)
    assert all(v in ("pass", "skipped") for k, v in readiness.verdicts.items() if k != "throughput")
    assert readiness["initial-loss"].evidence["classes"] == 10  # ln(C) from the model's logits


def test_hf_model_and_datasets_planted_bug_fails(tmp_path):
    from tests.integrations.projects.hf_digits import DigitsClassifier, arguments, datasets

    train, val = datasets()
    model = DigitsClassifier("softmax-ce")
    readiness = hf_inputs(model, train, val, arguments(str(tmp_path))).doctor(**FAST)
    assert readiness.verdicts["overfit-batch"] == "fail"
