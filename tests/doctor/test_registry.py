"""The probes are registered in one place: a module of ``overt.doctor.probes`` that defines
``PROBE``.  A new probe is one new file: it runs in its order, obeys what it needs, and its
evidence renders in the readiness note, with no other file edited."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from torch import nn

import overt
import overt.doctor.probes as probes_package
from overt.doctor import registry
from overt.doctor.cli import main
from tests.doctor import helpers as h

BUILT_IN = [("data", "Data"), ("initial-loss", "Initial loss"), ("optimizer", "Optimizer registration"),
            ("gradients", "Gradient flow"), ("overfit-batch", "Overfit one small batch"),
            ("validation", "Validation twice"), ("checkpoint", "Checkpoint round-trip and exact resume"),
            ("determinism", "Determinism"), ("parity", "CPU vs accelerator parity"),
            ("throughput", "Throughput and data starvation"), ("lr-find", "Learning-rate range test"),
            ("bench", "Device benchmark")]

NEW_PROBE = '''
"""A probe added for the test: the model's total weight norm."""

import torch

from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict


def _run(setup):
    r = ProbeResult("weight-norm", "Weight norm", "the norm of every weight together")
    norm = float(torch.sqrt(sum((p.detach().float() ** 2).sum() for p in setup.model.parameters())))
    r.evidence["norm"] = norm
    r.summary = f"total weight norm {norm:.3f} at {setup.setting('weight_norm_digits')} digits"
    if norm > setup.setting("weight_norm_limit"):
        r.verdict = Verdict.WARN
    return r


def _section(readiness, result):
    return ["## Weight norm", "", f"- measured: {result.evidence['norm']:.3f}", ""]


def _risks(readiness, result):
    return [(65, f"Weight norm {result.evidence['norm']:.3f} (a risk the new probe ranks after overfitting).")]


PROBE = Probe("weight-norm", "Weight norm", 55, _run, needs=("loss",), section=_section, risks=_risks,
              settings={"weight_norm_limit": 1000.0, "weight_norm_digits": 3})
'''


@pytest.fixture()
def new_probe(tmp_path, monkeypatch):
    """One more module in the probes package (a second folder on its path, as a plug-in would add)."""
    (tmp_path / "weight_norm.py").write_text(textwrap.dedent(NEW_PROBE))
    monkeypatch.setattr(probes_package, "__path__", [*probes_package.__path__, str(tmp_path)])
    registry.reset()
    yield "weight-norm"
    sys.modules.pop("overt.doctor.probes.weight_norm", None)
    registry.reset()


def test_the_built_in_probes_ids_titles_and_order():
    assert [(p.id, p.title) for p in registry.probes()] == BUILT_IN
    assert overt.doctor.ORDER == tuple(i for i, _ in BUILT_IN)
    assert {p.id: p.opt_in for p in registry.probes() if p.opt_in} == {"lr-find": "lr_find", "bench": "bench"}
    assert [p.id for p in registry.probes() if "loss" in p.needs] == [
        "gradients", "overfit-batch", "checkpoint", "determinism", "parity", "throughput", "lr-find", "bench"]


def test_a_new_probe_module_runs_in_its_order_and_renders_in_the_note(new_probe, tmp_path):
    train, val = h.digits(256, 64)
    model, opt, loss = h.setup()
    r = overt.doctor(model, opt, loss, train, val, progress=False,
                     only=["initial-loss", "overfit-batch", "weight-norm", "validation"], **h.FAST)
    assert list(r.verdicts) == ["initial-loss", "overfit-batch", "weight-norm", "validation"]
    assert r["weight-norm"].title == "Weight norm" and "at 3 digits" in r["weight-norm"].summary
    note = r.to_markdown()
    assert "| 3 | [Weight norm](#3-weight-norm-pass) | pass | total weight norm" in note
    assert note.index("## Evidence") < note.index("## Weight norm") < note.index("## How validation differs")
    risks = note[note.index("## Risks"):]
    assert "(a risk the new probe ranks after overfitting)" in risks
    if "Optimisation speed" in risks:  # ranked 60: before the new probe's 65
        assert risks.index("Optimisation speed") < risks.index("Weight norm")
    r = overt.doctor(model, opt, loss, train, progress=False, only=["weight-norm"], weight_norm_limit=0.5)
    assert r.verdicts == {"weight-norm": "warn"}  # its own setting, validated like the others
    with pytest.raises(overt.OvertError, match="did you mean weight_norm_limit"):
        overt.doctor(model, opt, loss, train, progress=False, weight_norm_limt=0.5)


def test_a_new_probe_obeys_what_it_needs(new_probe):
    train, _ = h.digits(256, 64)
    model, opt, _ = h.setup()
    r = overt.doctor(model, opt, nn.MSELoss(), train, progress=False, only=["initial-loss", "weight-norm"])
    assert r.verdicts == {"initial-loss": "fail", "weight-norm": "skipped"}
    assert "the loss cannot train on these targets" in r["weight-norm"].reason


def test_the_command_line_takes_the_new_probe(new_probe, tmp_path, capsys):
    out = tmp_path / "note"
    assert main(["tiny", "--only", "data,weight-norm", "weight_norm_digits=5", f"out={out}", "--quiet"]) == 0
    report = json.loads((out / "readiness.json").read_text())
    assert report["verdicts"] == {"data": "pass", "weight-norm": "pass"}
    assert "at 5 digits" in report["probes"][1]["summary"]
    assert "## Weight norm" in (out / "readiness.md").read_text()


def test_a_probe_needs_only_what_the_doctor_knows_and_ids_are_unique(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="needs 'gpu'"):
        registry.Probe("x", "X", 1, lambda setup: None, needs=("gpu",))
    (tmp_path / "again.py").write_text("from overt.doctor.registry import Probe\n"
                                       "PROBE = Probe('data', 'Data again', 5, lambda setup: None)\n")
    monkeypatch.setattr(probes_package, "__path__", [*probes_package.__path__, str(tmp_path)])
    registry.reset()
    try:
        with pytest.raises(ValueError, match="two probes have the id 'data'"):
            registry.probes()
    finally:
        sys.modules.pop("overt.doctor.probes.again", None)
        registry.reset()
