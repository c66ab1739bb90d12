"""`overt doctor` on the command line: exit codes, the directory it writes, and every built-in
recipe and example recipe passing."""

from __future__ import annotations

import json

import pytest

from overt.doctor.cli import main
from tests.conftest import REPO, run_overt
from tests.doctor.helpers import FAST

SPEED = [f"{k}={v}" for k, v in FAST.items() if k != "batch_size"]
EXAMPLES = sorted(str(p.relative_to(REPO)) for p in (REPO / "examples" / "recipes").glob("*.py")) + sorted(
    str(p.relative_to(REPO)) for p in (REPO / "examples" / "configs").glob("*.yaml"))


def test_overt_doctor_end_to_end_writes_a_run_like_directory(tmp_path):
    proc = run_overt("doctor", f"runs_root={tmp_path}", *SPEED)
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stderr.splitlines() if line.startswith("doctor [")]
    assert len(progress) == 10 and progress[0].startswith("doctor [ 1/10] Data")
    (directory,) = (tmp_path / "doctor").iterdir()
    assert directory.name.startswith("digits-")
    assert {"readiness.md", "readiness.json", "overfit.png", "grad-norms.png"} <= {p.name for p in directory.iterdir()}
    report = json.loads((directory / "readiness.json").read_text())
    assert report["passed"] and report["setup"]["model"].startswith("DigitsMLP")
    assert f"note: {directory / 'readiness.md'}" in proc.stderr


#: built-in recipes that run on their defaults without data files (the others need data_dir=/text=/csv=)
SELF_CONTAINED = ["digits", "tiny"]


@pytest.mark.parametrize("target", SELF_CONTAINED + EXAMPLES)
def test_every_built_in_recipe_and_example_passes(target, tmp_path):
    assert main([str(REPO / target) if "/" in target else target, *SPEED, f"out={tmp_path}", "--quiet"]) == 0, (
        (tmp_path / "readiness.md").read_text())


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["epochz=3", f"out={tmp_path / 'a'}"]) == 2
    assert "did you mean epochs" in capsys.readouterr().err
    assert main(["--only", "overfit", f"out={tmp_path / 'b'}"]) == 2
    assert "unknown probe 'overfit'" in capsys.readouterr().err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "model.safetensors").write_text("x")
    assert main([f"out={taken}"]) == 2
    assert "not a readiness note" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--no-such-flag"])
    assert exc.value.code == 2


RAW_PIXELS = '''
import torch
from torch import nn
from torch.utils.data import TensorDataset
import overt
from overt.recipes.digits import load_digits_split

def build(cfg):
    train, val = load_digits_split(0.2, 0)
    raw = lambda d: TensorDataset(d.tensors[0] * 255, d.tensors[1])  # un-normalised pixels
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return overt.Recipe(model=model, optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
                        loss_fn=nn.CrossEntropyLoss(), train_data=raw(train), val_data=raw(val))
'''


def test_warnings_fail_only_with_strict(tmp_path):
    recipe = tmp_path / "raw_pixels.py"
    recipe.write_text(RAW_PIXELS)
    common = [str(recipe), *SPEED, "--quiet", "--only", "data,optimizer"]
    assert main([*common, f"out={tmp_path / 'a'}"]) == 0
    report = json.loads((tmp_path / "a" / "readiness.json").read_text())
    assert report["verdicts"]["data"] == "warn" and "not normalised" in report["probes"][0]["summary"]
    assert main([*common, f"out={tmp_path / 'b'}", "--strict"]) == 1
