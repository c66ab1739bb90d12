"""The guard framework: once per cause, JSON, strict, ignore, config, context manager."""

from __future__ import annotations

import io
import json

import pytest
import torch
import torch.nn.functional as F

import overt
from overt.errors import ConfigError
from overt.guards.options import pyproject_ignore
from overt.guards.patches import ACTIVE

from .helpers import batches, guarded, mlp, slugs


def _stale_loop(steps=20, **kw):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = guarded(model, opt, stop_on_error=False, check_every=2, **kw)
    for xb, yb in batches(32, steps):
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    return g


def test_reported_once_per_cause_and_printed_once():
    g = _stale_loop()
    findings = g.report()
    assert [f.slug for f in findings].count("stale-gradients") == 1
    text = g.session.options.stream.getvalue()
    assert text.count("OVT101 stale-gradients") == 1
    assert "finding" in text.splitlines()[-1]


def test_json_report(tmp_path):
    path = tmp_path / "out" / "guards.json"
    g = _stale_loop(report_path=str(path))
    g.report()
    data = json.loads(path.read_text())
    f = data["findings"][0]
    assert set(f) >= {"slug", "code", "severity", "message", "where", "step"}
    assert (f["slug"], f["code"], f["severity"]) == ("stale-gradients", "OVT101", "error")


def test_strict_turns_warnings_into_errors():
    model = mlp(dropout=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for strict, expected in ((False, "warning"), (True, "error")):
        g = guarded(model, opt, strict=strict)
        model.eval()
        for xb, _ in batches(32, 3):
            model(xb)  # graph-in-eval, a warning
        findings = g.report()
        assert slugs(findings) == ["graph-in-eval"]
        assert findings[0].severity.value == expected


def test_ignore_by_slug_or_code():
    for ignore in (["stale-gradients"], ["OVT101"], ["ovt101, graph-leak"]):
        g = _stale_loop(ignore=ignore)
        assert g.report() == [], ignore


def test_unknown_ignore_is_a_clear_error():
    with pytest.raises(ConfigError) as err:
        guarded(mlp(), None, ignore=["stale-gradient"])
    assert "stale-gradients" in str(err.value)  # suggests the right spelling


def test_pyproject_ignore(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.overt]\nignore = ["graph-leak", "OVT101"]\n')
    (tmp_path / "sub").mkdir()
    assert pyproject_ignore(tmp_path / "sub") == ["graph-leak", "OVT101"]


def test_context_manager_reports_and_removes_every_hook():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stream = io.StringIO()
    with overt.guard(model, opt, stream=stream) as g:
        for xb, yb in batches(32, 3):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    assert g.findings == [] and "no findings" in stream.getvalue()
    assert not model._forward_pre_hooks and not model._forward_hooks
    assert not opt._optimizer_step_pre_hooks and not opt._optimizer_step_post_hooks
    assert not ACTIVE and F.cross_entropy.__name__ == "cross_entropy"
    assert not hasattr(F.cross_entropy, "__overt_original__")


def test_check_every_samples_checked_steps():
    """With check_every=N the expensive per-step work runs on few steps only."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=10, warmup_steps=2)
    seen = []
    original = g.session.grads.step_pre
    g.session.grads.step_pre = lambda oi, closure: (seen.append(oi.steps), original(oi, closure))
    for xb, yb in batches(32, 31):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert g.report() == []
    assert seen == [0, 1, 10, 20, 30]


@pytest.mark.parametrize("how", ["exception", "guard-stop", "keyboard-interrupt", "normal"])
def test_the_context_manager_writes_its_report_however_the_block_exits(tmp_path, how):
    import json

    import overt
    from overt.errors import OvertError

    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    report = tmp_path / "guards.json"
    raised = {"exception": ValueError, "guard-stop": OvertError, "keyboard-interrupt": KeyboardInterrupt}.get(how)
    try:
        with overt.guard(model, opt, report_path=str(report), stream=io.StringIO()):
            for step in range(3):
                if how != "guard-stop":
                    opt.zero_grad()
                torch.nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
                opt.step()
                if how == "exception" and step == 1:
                    raise ValueError("boom")
                if how == "keyboard-interrupt" and step == 1:
                    raise KeyboardInterrupt
    except BaseException as exc:
        assert raised is not None and isinstance(exc, raised), exc
    else:
        assert raised is None
    data = json.loads(report.read_text())
    slugs = [f["slug"] for f in data["findings"]]
    assert slugs == (["stale-gradients"] if how == "guard-stop" else [])
