"""``OvertTrainerCallback`` in a real Hugging Face Trainer (CPU, a few steps on digits)."""

from __future__ import annotations

import io
import json

import pytest

from tests.conftest import TIMING

pytest.importorskip("transformers")
pytest.importorskip("datasets")

from overt.integrations.hf import OvertTrainerCallback  # noqa: E402
from tests.integrations.projects import hf_digits  # noqa: E402


def _losses(history):
    return [{k: v for k, v in entry.items() if k in ("loss", "eval_loss", "grad_norm", "step")}
            for entry in history if "loss" in entry or "eval_loss" in entry]


def test_clean_run_is_silent_and_metrics_are_identical(tmp_path):
    out = io.StringIO()
    cb = OvertTrainerCallback(stream=out, ignore=sorted(TIMING))  # timing findings depend on the machine
    guarded = hf_digits.build(None, out_dir=str(tmp_path / "with"), callbacks=[cb])
    guarded.train()
    plain = hf_digits.build(None, out_dir=str(tmp_path / "without"))
    plain.train()
    assert cb.findings == []
    assert out.getvalue().strip() == "overt guard: no findings."
    assert _losses(guarded.state.log_history) == _losses(plain.state.log_history)
    assert not any("overt/findings" in entry for entry in guarded.state.log_history)
    assert json.loads((tmp_path / "with" / "guards.json").read_text()) == {"findings": []}


@pytest.mark.parametrize("bug, slug", [
    ("softmax-ce", "softmax-before-cross-entropy"),
    ("frozen-mismatch", "params-not-optimized"),
    ("plain-list", "unregistered-submodule"),
])
def test_planted_bug_in_the_log_history_and_guards_json(tmp_path, bug, slug):
    cb = OvertTrainerCallback(stream=io.StringIO())
    trainer = hf_digits.build(bug, out_dir=str(tmp_path), callbacks=[cb])
    trainer.train()
    assert slug in {f.slug for f in cb.findings}
    report = json.loads((tmp_path / "guards.json").read_text())
    assert slug in {f["slug"] for f in report["findings"]}
    logged = [e for e in trainer.state.log_history if "overt/findings" in e]
    assert logged and logged[0]["overt/findings"] >= 1 and "loss" in logged[0]  # in a regular log entry
    finding = next(f for f in cb.findings if f.slug == slug)
    assert 0 <= finding.step <= trainer.state.global_step


def test_stop_on_error_asks_the_trainer_to_stop(tmp_path):
    cb = OvertTrainerCallback(stream=io.StringIO(), stop_on_error=True)
    trainer = hf_digits.build("softmax-ce", out_dir=str(tmp_path), callbacks=[cb])
    trainer.train()  # no exception
    assert trainer.state.global_step < 16
