"""Severity levels, project settings for them, and what lint knows about a project (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.errors import ConfigError
from overt.lint import lint_paths
from overt.lint.cli import main
from overt.lint.config import LintConfig, load_config
from overt.lint.engine import lint_source

FIXTURES = Path(__file__).parent / "fixtures"

DATA_ATTR = """\
import torch
import torch.nn as nn

layer = nn.Linear(4, 4)
layer.weight.data.normal_(0, 0.02)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        self.fc.weight.data.clamp_(-1, 1)
        return self.fc(x)
"""


def _write(folder: Path, name: str, text: str) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_info_findings_are_hidden_by_default_and_shown_on_request(tmp_path, capsys):
    p = _write(tmp_path, "m.py", DATA_ATTR)
    found, _ = lint_paths([p], LintConfig(root=tmp_path))
    assert [(f.line, f.slug, f.severity.value) for f in found] == [(14, "data-attribute", "warning")]
    found, _ = lint_paths([p], LintConfig(root=tmp_path, min_severity="info"))
    assert [(f.line, f.severity.value) for f in found] == [(5, "info"), (14, "warning")]
    assert main([str(p), "--min-severity", "info"]) == 1
    out = capsys.readouterr().out
    assert "OVT407 data-attribute [info]" in out and "OVT407 data-attribute [warning]" in out


def test_pyproject_sets_levels_per_rule(tmp_path, capsys):
    _write(tmp_path, "pyproject.toml", '[tool.overt]\nmin-severity = "info"\n'
                                       '[tool.overt.severity]\ndata-attribute = "error"\nOVT601 = "off"\n')
    p = _write(tmp_path, "m.py", DATA_ATTR + "state = torch.load('x.pt')\n")
    assert main([str(p), "--format", "json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert [(i["line"], i["slug"], i["severity"]) for i in items] == [
        (5, "data-attribute", "error"), (14, "data-attribute", "error")]
    sarif = json.loads(_sarif(p, capsys))
    assert {r["level"] for r in sarif["runs"][0]["results"]} == {"error"}


def _sarif(p: Path, capsys) -> str:
    main([str(p), "--format", "sarif"])
    return capsys.readouterr().out


def test_a_bad_level_is_a_clear_config_error(tmp_path):
    path = _write(tmp_path, "pyproject.toml", '[tool.overt.severity]\ndataparallel = "loud"\n')
    with pytest.raises(ConfigError, match="loud"):
        load_config(path)
    assert main([str(_write(tmp_path, "t.py", "x = 1\n"))]) == 2


def test_parse_errors_are_in_json_and_sarif(tmp_path, capsys):
    _write(tmp_path, "bad.py", "def broken(:\n")
    good = _write(tmp_path, "good.py", "import torch\nm = torch.nn.Linear(1, 1)\nm.forward(torch.ones(1))\n")
    assert main([str(tmp_path), "--format", "json"]) == 2
    items = json.loads(capsys.readouterr().out)
    errors = [i for i in items if i.get("error")]
    assert len(errors) == 1 and errors[0]["path"].endswith("bad.py") and errors[0]["line"] == 1
    assert "cannot parse" in errors[0]["message"]
    assert any(i.get("slug") == "forward-called-directly" and i["path"] == good.as_posix() for i in items)
    assert main([str(tmp_path), "--format", "sarif"]) == 2
    run = json.loads(capsys.readouterr().out)["runs"][0]
    [inv] = run["invocations"]
    assert inv["executionSuccessful"] is False
    [note] = inv["toolExecutionNotifications"]
    assert note["level"] == "error" and "cannot parse" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["region"]["startLine"] == 1


def test_a_clean_sarif_run_says_it_succeeded(tmp_path, capsys):
    p = _write(tmp_path, "ok.py", "x = 1\n")
    assert main([str(p), "--format", "sarif"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["invocations"][0]["executionSuccessful"] is True


@pytest.mark.parametrize(("files", "found"), [
    ({"requirements.txt": "torch>=2.6\nnumpy\n"}, False),
    ({"pyproject.toml": '[project]\ndependencies = ["torch >= 2.7.1"]\n'}, False),
    ({"setup.cfg": "[options]\ninstall_requires =\n    torch>=1.13\n"}, True),
    ({"requirements.txt": "torch<2.6\n"}, True),
    ({}, True),
])
def test_unsafe_load_reads_the_projects_torch_floor(tmp_path, files, found):
    (tmp_path / ".git").mkdir()  # the repository's root: the search for packaging files stops here
    for name, text in files.items():
        _write(tmp_path, name, text)
    p = _write(tmp_path, "pkg/train.py", "import torch\nstate = torch.load('ckpt.pt')\n")
    result, _ = lint_paths([p], LintConfig(root=tmp_path))
    assert bool([f for f in result if f.slug == "unsafe-load"]) is found


def test_modules_of_another_framework_are_not_linted():
    mxnet = "from mxnet import autograd, gluon\nfor X, y in data_iter:\n    l = loss(net(X), y)\n    l.backward()\n" \
            "    trainer.step(1)\n"
    assert lint_source(mxnet) == []
    assert lint_source("import torch\n" + mxnet.replace("trainer", "optimizer")) != []


def test_every_rule_states_its_fix_apart_from_its_message():
    """Rules give Finding.fix as a field (Hit.fix); nothing is parsed out of the message."""
    for path in sorted(FIXTURES.glob("*/bad*.py")):
        for hit in lint_source(path.read_text(), path.name):
            assert hit.fix and hit.text.count(hit.fix) == 1, (path, hit.slug)


WGAN_CLIP = """\
import torch
import torch.nn as nn

D = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
d_opt = torch.optim.RMSprop(D.parameters(), lr=2e-3)
for it in range(10):
    {before}
    d_real = D(torch.randn(64, 1)).mean()
    {between}
    d_opt.zero_grad()
    (-d_real).backward()
    d_opt.step()
"""
CLIP = "for p in D.parameters(): p.data.clamp_(-0.1, 0.1)"


@pytest.mark.parametrize("where", ["before", "between"])
def test_a_data_write_is_a_warning_only_between_a_forward_and_its_backward(where):
    """WGAN's weight clipping at the top of the critic loop (before the forward that reads the weights) changes
    no saved tensor: hygiene (info); the same clipping between the forward and backward() is the bug (warning)."""
    src = WGAN_CLIP.format(before=CLIP if where == "before" else "pass", between=CLIP if where == "between" else "pass")
    findings = [f for f in lint_source(src, "wgan.py") if f.slug == "data-attribute"]
    assert [str(f.severity.value if hasattr(f.severity, "value") else f.severity) for f in findings] == \
        (["info"] if where == "before" else ["warning"])


CLIP_THEN_GENERATOR = """\
import torch
import torch.nn as nn

G = nn.Linear(2, 1)
D = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
g_opt = torch.optim.RMSprop(G.parameters(), lr=2e-3)
d_opt = torch.optim.RMSprop(D.parameters(), lr=2e-3)
for it in range(10):
    d_opt.zero_grad()
    d_loss = D(G(torch.randn(64, 2)).detach()).mean() - D(torch.randn(64, 1)).mean()
    {clip_here}
    {critic_backward}
    d_opt.step()
    {clip_after}
    if it % 5 == 0:
        g_opt.zero_grad()
        (-D(G(torch.randn(64, 2))).mean()).backward()
        g_opt.step()
"""


@pytest.mark.parametrize("case, severity", [
    ("after the critic's step", "info"),
    ("between forward and backward", "warning"),
    ("after a backward that keeps its graph", "warning"),
])
def test_a_data_write_after_the_backward_that_consumed_the_graph_is_hygiene(case, severity):
    """Clipping the critic right after its step, with the generator's forward and backward() after it: the
    critic's graph was freed by its backward() before the write, and the generator's forward reads the clipped
    weights, so no saved tensor changed (info).  The write before that backward(), or after one that keeps the
    graph with retain_graph=True, is the bug (warning)."""
    src = CLIP_THEN_GENERATOR.format(
        critic_backward="d_loss.backward(retain_graph=True)" if "keeps" in case else "d_loss.backward()",
        clip_here=CLIP if case.startswith("between") else "pass",
        clip_after=CLIP if not case.startswith("between") else "pass")
    findings = [f for f in lint_source(src, "wgan.py") if f.slug == "data-attribute"]
    assert [str(f.severity.value if hasattr(f.severity, "value") else f.severity) for f in findings] == [severity]


FIRST_CALL_INIT = """\
import torch
import torch.nn as nn


class DataInitScale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n))
        self.bias = nn.Parameter(torch.zeros(n))
        self.ready = {flag_init}

    def forward(self, x):
        {before}
        if {test}:
            self.weight.data.copy_(-torch.log(x.std(0) + 1e-6))
            {set_flag}
        return (x - self.bias) * torch.exp(self.weight)
"""


@pytest.mark.parametrize("case, severity", [
    ("once", "info"), ("once, == False", "info"),
    ("read before the branch", "warning"), ("flag never set", "warning"), ("every training call", "warning")])
def test_a_data_dependent_init_on_the_first_forward_is_hygiene(case, severity):
    """ActNorm-style initialisation from the first batch (``if not self.ready: w.data.copy_(...); self.ready =
    True``) runs once, before any forward has saved the weight in a graph: hygiene (info).  The same write after
    forward has read the weight, under a flag never set, or under a test that is true every call is the bug."""
    src = FIRST_CALL_INIT.format(
        flag_init="False",
        before="y = self.weight.sum()" if case == "read before the branch" else "pass",
        test={"once, == False": "self.ready == False", "every training call": "self.training"}.get(case, "not self.ready"),
        set_flag="pass" if case in ("flag never set", "every training call") else "self.ready = True")
    findings = [f for f in lint_source(src, "actnorm.py") if f.slug == "data-attribute"]
    assert [str(f.severity.value if hasattr(f.severity, "value") else f.severity) for f in findings] == [severity]


VERSION_ARMS = """\
import torch


def load_cache(path, other, trusted):
    {bind}
    if {test}:
        data = torch.load({first})
    else:
        data = torch.load(path, weights_only=False)
    return data
"""


@pytest.mark.parametrize("bind, test, first, severity", [
    ("torch_version = torch.__version__", 'torch_version < "2.6"', "path", "info"),
    ("pass", 'torch.__version__ < "2.6"', "path", "info"),
    ("pass", "trusted", "path", "warning"),  # two loads for two kinds of file: the bare one is undecided
    ("pass", 'torch.__version__ < "2.6"', "other", "warning"),  # another file than the decided arm's
])
def test_a_load_in_a_torch_version_arm_whose_other_arm_writes_the_choice_out_is_decided(bind, test, first, severity):
    """``if <torch's version> < 2.6: torch.load(f)`` / ``else: torch.load(f, weights_only=False)``: the author
    wrote the decision out in one arm; the bare arm is that decision on a torch whose default is the same, so
    it is reported at info level like the explicit one.  An ``if`` on anything else, or a load of another
    file, stays a warning."""
    src = VERSION_ARMS.format(bind=bind, test=test, first=first)
    findings = [f for f in lint_source(src, "cache.py") if f.slug == "unsafe-load" and f.line == 7]
    levels = [str(f.severity.value if hasattr(f.severity, "value") else f.severity) for f in findings]
    assert [level if level == "info" else "warning" for level in levels] == [severity]  # None: the rule's level
