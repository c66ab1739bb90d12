"""``overt.doctor(...)``: the Readiness it returns, the files it writes, and that it never
changes the user's objects."""

from __future__ import annotations

import json
import random
import sys

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import overt
from overt.doctor import Readiness, Verdict
from tests.doctor import helpers as h


@pytest.fixture(scope="module")
def data():
    return h.digits()


@pytest.fixture(scope="module")
def clean_report(data):
    model, opt, loss = h.setup()
    return overt.doctor(model, opt, loss, data[0], data[1], progress=False, lr_find=True, lr_find_steps=40, **h.FAST)


def test_clean_setup_is_ready_with_every_probe(clean_report):
    r = clean_report
    assert isinstance(r, Readiness) and r.passed and r.exit_code() == 0
    assert list(r.verdicts) == ["data", "initial-loss", "optimizer", "gradients", "overfit-batch", "validation",
                                "checkpoint", "determinism", "parity", "throughput", "lr-find"]
    assert r.verdicts["parity"] == ("skipped" if not torch.cuda.is_available() else "pass")
    assert r["overfit-batch"].evidence["end_accuracy"] == 1.0
    assert json.loads(r.to_json())["verdicts"] == r.verdicts


def test_the_note_has_the_seed_sections_with_measured_numbers(clean_report):
    note = clean_report.to_markdown()
    for heading in ("## Setup", "## Probes", "## Evidence", "## How validation differs from training",
                    "## What a checkpoint holds, and resuming", "## Risks for a larger data set or a longer run"):
        assert heading in note
    assert "`CrossEntropyLoss()`" in note and "Adam(lr=0.003" in note
    rate = clean_report["throughput"].evidence["samples_per_s"]
    assert f"{rate:,.0f} samples/s" in note  # the risks quote the measurement
    size = clean_report["checkpoint"].evidence["checkpoint-roundtrip"]["bytes"]
    assert f"{size / 1e6:.2f} MB each" in note


def test_the_doctor_never_changes_the_users_objects(data):
    model, opt, loss = h.setup()
    x, y = h.first_batch(data[0])
    for _ in range(3):  # the optimizer has state, the model has gradients
        opt.zero_grad()
        loss(model(x), y).backward()
        opt.step()
    model.eval()
    loader = DataLoader(data[0], batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(7))
    before = h.fingerprint(model, opt)
    rng = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy(), loader.generator.get_state())
    report = overt.doctor(model, opt, loss, loader, data[1], progress=False, lr_find=True, lr_find_steps=20, **h.FAST)
    assert len(report.probes) == 11
    assert h.fingerprint(model, opt) == before
    assert torch.equal(torch.get_rng_state(), rng[0]) and random.getstate() == rng[1]
    assert (np.random.get_state()[1] == rng[2]).all() and torch.equal(loader.generator.get_state(), rng[3])
    assert not model.training


def test_write_puts_the_note_json_and_plots_in_a_directory(clean_report, tmp_path):
    path = clean_report.write(tmp_path / "doc")
    assert path.name == "readiness.md"
    files = {p.name for p in (tmp_path / "doc").iterdir()}
    assert {"readiness.md", "readiness.json", "overfit.png", "grad-norms.png", "lr-find.png"} <= files
    assert "![Overfit one small batch](overfit.png)" in path.read_text()


def test_without_matplotlib_the_note_says_how_to_get_plots(clean_report, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    clean_report.write(tmp_path)
    note = (tmp_path / "readiness.md").read_text()
    assert "Plots skipped" in note and 'pip install "overt[plots]"' in note
    assert not list(tmp_path.glob("*.png"))


def test_settings_are_validated_and_probes_can_be_chosen(data):
    model, opt, loss = h.setup()
    with pytest.raises(overt.OvertError, match="did you mean overfit_steps"):
        overt.doctor(model, opt, loss, data[0], overfit_step=3)
    r = overt.doctor(model, opt, loss, data[0], progress=False, only=["optimizer", "gradients"])
    assert list(r.verdicts) == ["optimizer", "gradients"]


def test_progress_prints_one_line_per_probe(data, capsys):
    model, opt, loss = h.setup()
    overt.doctor(model, opt, loss, data[0], only=["data", "initial-loss", "optimizer"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("doctor [")]
    assert len(lines) == 3 and "[ 2/3] Initial loss" in lines[1] and "PASS" in lines[1]


def test_a_crashing_probe_fails_with_the_error_not_the_doctor(data):
    model, opt, _ = h.setup()

    def loss(output, target):
        raise RuntimeError("this loss is broken")

    r = overt.doctor(model, opt, loss, data[0], progress=False, only=["gradients", "optimizer"])
    assert r.verdicts == {"gradients": "fail", "optimizer": "pass"}
    assert "this loss is broken" in r["gradients"].summary and r.exit_code() == 1


def test_strict_fails_on_warnings(data):
    model, opt, loss = h.setup()
    model[0].weight.requires_grad_(False)  # frozen but still in the optimizer: a warning
    r = overt.doctor(model, opt, loss, data[0], progress=False, only=["optimizer"])
    assert r["optimizer"].verdict is Verdict.WARN and r.passed
    assert r.exit_code() == 0 and r.exit_code(strict=True) == 1


def test_a_plain_list_of_samples_is_a_data_set_for_the_probes_that_train(data):
    """A recipe's training set may be a list of (x, y) samples: the Trainer batches it like any Dataset."""
    samples = [data[0][i] for i in range(256)]
    model, opt, loss = h.setup()
    r = overt.doctor(model, opt, loss, samples, progress=False, lr_find=True, lr_find_steps=20,
                     only=["overfit-batch", "determinism", "throughput", "lr-find"], **h.FAST)
    assert "could not run" not in " ".join(p.summary for p in r.probes), r.verdicts
    assert r["throughput"].evidence["batch_size"] == 32 and r["lr-find"].evidence["steps"] >= 10
