"""``OvertCallback`` in a real Lightning Trainer (CPU, a few batches of digits)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.conftest import TIMING

pytest.importorskip("lightning")

from overt.integrations.lightning import OvertCallback  # noqa: E402
from tests.integrations.projects import lightning_digits  # noqa: E402


def _csv_rows(root):
    (path,) = list((root / "logs").rglob("metrics.csv"))
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_clean_run_is_silent_and_metrics_are_identical(tmp_path):
    out = io.StringIO()
    cb = OvertCallback(stream=out, ignore=sorted(TIMING))  # timing findings depend on the machine
    trainer, _ = lightning_digits.fit(None, callbacks=[cb], root=str(tmp_path / "with"))
    plain, _ = lightning_digits.fit(None, root=str(tmp_path / "without"))
    assert cb.findings == []
    assert out.getvalue().strip() == "overt guard: no findings."
    assert _csv_rows(tmp_path / "with") == _csv_rows(tmp_path / "without")
    report = json.loads((tmp_path / "with" / "logs" / "version_0" / "guards.json").read_text())
    assert report == {"findings": []}


@pytest.mark.parametrize("bug, slug", [
    ("softmax-ce", "softmax-before-cross-entropy"),
    ("eval-in-train-mode", "train-mode-in-eval"),
    ("manual-no-zero-grad", "stale-gradients"),
    ("frozen-mismatch", "params-not-optimized"),
    # Lightning runs training_step (the forward that reveals the module) inside optimizer.step(closure):
    # the frozen check must wait until the module is known (the closure step is checked after the closure)
    ("frozen-weights", "weights-frozen"),
])
def test_planted_bug_reported_in_the_logger_and_guards_json(tmp_path, bug, slug):
    cb = OvertCallback(stream=io.StringIO())
    trainer, _ = lightning_digits.fit(bug, callbacks=[cb], root=str(tmp_path))
    assert slug in {f.slug for f in cb.findings}
    report = json.loads((tmp_path / "logs" / "version_0" / "guards.json").read_text())
    assert slug in {f["slug"] for f in report["findings"]}
    rows = [r for r in _csv_rows(tmp_path) if r.get("overt/findings")]
    assert rows and float(rows[0]["overt/findings"]) >= 1
    finding = next(f for f in cb.findings if f.slug == slug)
    assert 0 <= finding.step <= trainer.global_step  # the trainer's own step


def test_the_modules_training_step_calls_are_found(tmp_path):
    """``training_step`` calls ``self(x)`` here; the finding names parameters by the
    LightningModule's own names."""
    cb = OvertCallback(stream=io.StringIO())
    lightning_digits.fit("frozen-mismatch", callbacks=[cb], root=str(tmp_path))
    (finding,) = [f for f in cb.findings if f.slug == "params-not-optimized"]
    assert "DigitsModule.net.0.weight" in finding.message


def test_stop_on_error_stops_the_trainer_gracefully(tmp_path):
    cb = OvertCallback(stream=io.StringIO(), stop_on_error=True)
    trainer, _ = lightning_digits.fit("manual-no-zero-grad", callbacks=[cb], root=str(tmp_path), epochs=5)
    assert trainer.should_stop
    assert trainer.current_epoch < 5  # stopped early, no exception


def test_a_failing_logger_does_not_break_training(tmp_path):
    from lightning.pytorch.loggers import Logger

    class BadLogger(Logger):
        name = "bad"
        version = 0

        def log_metrics(self, metrics, step=None):
            if any(k.startswith("overt/") for k in metrics):
                raise RuntimeError("store down")

        def log_hyperparams(self, *args, **kwargs):
            pass

    out = io.StringIO()
    cb = OvertCallback(stream=out)
    trainer, _ = lightning_digits.fit("softmax-ce", callbacks=[cb], root=str(tmp_path), logger=BadLogger())
    assert trainer.current_epoch == 2  # trained to the end
    assert {f.slug for f in cb.findings} == {"softmax-before-cross-entropy"}
    assert "internal error in OvertCallback logging to BadLogger" in out.getvalue()


def test_a_one_step_warmup_judges_gradients_after_the_closure(tmp_path):
    """Lightning computes the gradients inside ``optimizer.step(closure)``: at the step's pre-hook the
    first step has none yet, so a warm-up of one step must judge ``no-gradient`` after the step."""
    cb = OvertCallback(stream=io.StringIO(), warmup_steps=1, ignore=sorted(TIMING))
    lightning_digits.fit(None, callbacks=[cb], root=str(tmp_path))
    assert cb.findings == []


def test_non_finite_gradients_are_reported_at_the_step_that_made_them(tmp_path):
    """Automatic optimisation makes the gradients inside optimizer.step(closure); the checks read
    them after the closure (before, in the step's pre-hook, they read the previous step's: an
    overflow at step 2 was reported at step 3)."""
    cb = OvertCallback(stream=io.StringIO(), check_every=1)
    lightning_digits.fit("overflow-at-step-2", callbacks=[cb], root=str(tmp_path), epochs=1)
    steps = sorted(f.step for f in cb.findings if f.slug == "non-finite")
    assert steps and steps[0] == 2
