"""Bad input to `overt train` gets overt's error (what, where, why, fix), exit status 2, no
traceback, and `status.json` saying `failed` with the reason wherever a run directory exists."""

from __future__ import annotations

import json
import os
import math
import signal
import textwrap
from pathlib import Path

import pytest

from overt.cli.train import main as train

FAST = ["progress=off", "tensorboard=false", "guards=false", "checkpoint=false"]


def fails(args: list[str], capsys, *expected: str) -> str:
    assert train(args) == 2
    err = capsys.readouterr().err
    assert "overt train: error:" in err and "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    return err


def failed_status(run_dir: Path) -> dict:
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed"
    return status


@pytest.mark.parametrize("override, key", [("epochs=-1", "epochs"), ("epochs=0", "epochs"),
                                           ("batch_size=0", "batch_size")])
def test_recipe_defaults_keep_the_engine_constraints(tmp_path, capsys, override, key):
    # digits re-declares epochs and batch_size in its defaults: the constraints (>= 1) must stay
    fails(["digits", f"run_dir={tmp_path / 'r'}", override, *FAST], capsys,
          f"bad value for config key {key!r}", "greater than or equal to 1")
    assert not (tmp_path / "r").exists()  # refused before any data was loaded or folder made


@pytest.mark.parametrize("override, text", [
    ("device=bogus", "not a device"),
    ("preempt_signal=SIGKILL", "SIGKILL cannot be caught"),
    ("preempt_signal=SIGNOPE", "unknown signal 'SIGNOPE'"),
])
def test_bad_settings_are_refused_before_any_data_loads(tmp_path, capsys, override, text):
    fails(["digits", f"run_dir={tmp_path / 'r'}", override, *FAST], capsys, text)
    assert not (tmp_path / "r").exists()


def test_run_dir_naming_an_existing_file(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    fails(["digits", f"run_dir={tmp_path / 'f'}", *FAST], capsys, "is an existing file, not a folder")


@pytest.mark.parametrize("fraction, text", [(1, "the training data is empty"), (0, "the validation data is empty")])
def test_an_empty_training_or_validation_set(tmp_path, capsys, fraction, text):
    run_dir = tmp_path / "r"
    fails(["digits", f"run_dir={run_dir}", f"val_fraction={fraction}", *FAST], capsys, text)
    assert text in failed_status(run_dir)["error"]
    assert not (run_dir / "model.safetensors").exists()


RECIPE = '''
import math, torch
from torch import nn
from overt.recipes import digits
defaults = dict(digits.defaults, epochs=1)
def build(cfg):
    recipe = digits.build(cfg)
    {change}
    return recipe
'''


def recipe_file(tmp_path: Path, name: str, change: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(RECIPE.format(change=textwrap.indent(textwrap.dedent(change), "    ").strip()))
    return str(path)


def test_a_loss_with_reduction_none(tmp_path, capsys):
    recipe = recipe_file(tmp_path, "loss_none", "recipe.loss_fn = nn.CrossEntropyLoss(reduction='none')")
    err = fails([recipe, f"run_dir={tmp_path / 'r'}", *FAST], capsys,
                "returned a tensor of shape (32,), not a scalar", 'reduction="mean"')
    assert "epoch 0, batch 0" in err
    failed_status(tmp_path / "r")


def test_a_loss_that_returns_a_python_float(tmp_path, capsys):
    recipe = recipe_file(tmp_path, "loss_float",
                         "recipe.loss_fn = lambda out, y: float(nn.functional.cross_entropy(out, y).detach())")
    fails([recipe, f"run_dir={tmp_path / 'r'}", *FAST], capsys, "returned a float", "not a tensor")
    failed_status(tmp_path / "r")


NAN_IN_VAL = """
x, y = recipe.val_data.tensors
x = x.clone(); x[3, 5] = math.nan
recipe.val_data = torch.utils.data.TensorDataset(x, y)
"""


def test_a_nan_validation_loss_stops_the_run(tmp_path, capsys):
    recipe = recipe_file(tmp_path, "val_nan", NAN_IN_VAL)
    run_dir = tmp_path / "r"
    fails([recipe, f"run_dir={run_dir}", "progress=off", "tensorboard=false", "checkpoint=false"], capsys,
          "non-finite", "val/loss=nan")
    assert "val/loss=nan" in failed_status(run_dir)["error"]


def test_metrics_jsonl_stays_valid_json_with_nan(tmp_path, capsys):
    recipe = recipe_file(tmp_path, "val_nan_unguarded", NAN_IN_VAL)
    run_dir = tmp_path / "r"
    assert train([recipe, f"run_dir={run_dir}", *FAST]) == 0

    def strict(token):
        raise AssertionError(f"bare {token} in metrics.jsonl")

    records = [json.loads(line, parse_constant=strict) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["val/loss"] == "nan" and math.isnan(float(records[-1]["val/loss"]))
    from overt.run.reader import read_metrics

    assert math.isnan(read_metrics(run_dir / "metrics.jsonl")[-1]["val/loss"])  # read back as a float
    json.loads((run_dir / "summary.json").read_text(), parse_constant=strict)


def test_a_failing_metrics_log_is_reported_once(tmp_path, capsys):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    run_dir = tmp_path / "r"
    from overt.compose import Trainer  # overt.Trainer: with the run directory's writers
    from overt.engine.callbacks import Callback
    from overt.recipes.digits import DigitsMLP, load_digits_split
    from overt.run.metrics_log import MetricsLog

    import torch

    class DiskFills(Callback):
        """From the first epoch on, every write of metrics.jsonl: No space left on device (its descriptor
        now points at /dev/full; a planted link would be refused, not followed)."""

        def on_epoch_start(self, trainer, epoch):
            if epoch == 0:
                log = next(c for c in trainer.callbacks if isinstance(c, MetricsLog))
                full = os.open("/dev/full", os.O_WRONLY)
                os.dup2(full, log._fh.fileno())
                os.close(full)

    train_ds, val_ds = load_digits_split(0.2, 0)
    model = DigitsMLP(32, 0.0)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), train_ds,
                      val_ds, run_dir=run_dir, epochs=2, log_every=5, progress="off", tensorboard=False,
                      checkpoint=False, guards=False, callbacks=[DiskFills()])
    summary = trainer.fit()
    err = capsys.readouterr().err
    assert err.count("cannot write metrics.jsonl") == 1 and "Traceback" not in err, err
    assert "No space left on device" in summary["logging_errors"]["metrics.jsonl"]
    assert json.loads((run_dir / "status.json").read_text())["status"] == "completed"


def _blocked_in_worker(_):
    return sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_loader_workers_never_see_preemption_signals(digits):
    """SLURM/Kubernetes/systemd signal the whole process group: DataLoader workers start with the
    preemption signals blocked (so the main process alone decides: finish the step, save, stop);
    the main process's own mask is left as it was."""
    import torch

    from overt.engine.data import build_loader

    class Masks(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.tensor(_blocked_in_worker(i))

    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    loader = build_loader(Masks(), batch_size=2, shuffle=False, seed=0, num_workers=1)
    masks = {tuple(row.tolist()) for batch in loader for row in batch}
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
    for mask in masks:
        assert int(signal.SIGTERM) in mask and int(signal.SIGINT) in mask


@pytest.mark.parametrize("recipe", ["tiny", "digits"])
def test_an_absurd_batch_size_is_a_usage_error(tmp_path, capsys, recipe):
    # 2**62: twice that (the default validation batch) is no longer a valid index: it crashed in the loader
    fails([recipe, f"run_dir={tmp_path / 'r'}", f"batch_size={2 ** 62}", *FAST], capsys,
          "bad value for config key 'batch_size'", "less than or equal to")
    assert not (tmp_path / "r").exists()
