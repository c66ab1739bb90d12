"""``overt run``: an unmodified script under the guards, its argv and exit code kept."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from overt.guards import run_cli
from overt.guards.patches import ACTIVE
from tests.conftest import run_overt

SCRIPT = '''
import sys
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=32, shuffle=True, num_workers=WORKERS)
{model}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(2):
    for xb, yb in loader:
        {reset}
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
print("args", sys.argv[1:])
{tail}
'''

MODEL = "model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))"


def _script(tmp_path: Path, *, reset="opt.zero_grad()", model=MODEL, tail="", workers=0, name="train.py") -> Path:
    path = tmp_path / name
    path.write_text(SCRIPT.replace("WORKERS", str(workers)).format(model=model, reset=reset, tail=tail))
    return path


def _run(argv: list[str]) -> int:
    # the script's sys.argv, sys.path[0] and __main__ stay after it, as after `python script.py`
    saved = sys.argv[:], sys.path[0], sys.modules["__main__"]
    try:
        code = run_cli.main(argv)
    finally:
        sys.argv, sys.path[0], sys.modules["__main__"] = saved
    assert not ACTIVE  # every hook and wrapper removed
    return code


def test_clean_script_zero_findings_and_its_argv(tmp_path, capsys):
    report = tmp_path / "r.json"
    code = _run(["--report", str(report), str(_script(tmp_path)), "--lr", "3"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "args ['--lr', '3']" in out
    assert json.loads(report.read_text()) == {"findings": []}
    assert "no findings" in err


def test_planted_bug_with_dataloader_workers_subprocess(tmp_path):
    """The real command line, with worker processes: found once, by the main process, stopped, exit 1."""
    script = _script(tmp_path, reset="pass", workers=2)
    report = tmp_path / "r.json"
    proc = run_overt("run", "--report", str(report), str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(report.read_text())["findings"]
    assert [f["slug"] for f in findings] == ["stale-gradients"]
    assert f"{script.name}:20" in findings[0]["where"]  # the user's opt.step() line
    assert proc.stderr.count("OVT101 stale-gradients") == 2  # as found, and in the stop message
    assert "Traceback" not in proc.stderr


def test_exit_code_is_the_scripts(tmp_path):
    assert _run([str(_script(tmp_path, tail="sys.exit(3)"))]) == 3
    assert _run([str(_script(tmp_path, tail="sys.exit(0)"))]) == 0
    assert _run([str(_script(tmp_path, tail="raise ValueError('boom')"))]) == 1


def test_strict_fails_a_run_with_warnings(tmp_path, capsys):
    model = MODEL + "\nmodel.append(nn.Dropout(0.5))"
    tail = "model.eval()\nwith torch.enable_grad():\n    model(x[:8]); model(x[8:16])"
    script = _script(tmp_path, model=model, tail=tail)
    # dataloader-starvation, the one timing-based guard, may fire on a loaded machine: ignored
    quiet = ["--ignore", "dataloader-starvation"]
    assert _run([*quiet, str(script)]) == 0
    assert "graph-in-eval [warning]" in capsys.readouterr().err
    assert _run([*quiet, "--strict", str(script)]) == 1
    assert "graph-in-eval [error]" in capsys.readouterr().err


def test_ignore_flag_and_pyproject(tmp_path, capsys):
    script = _script(tmp_path, model=MODEL + "\nmodel.extra = [nn.Linear(2, 2)]")
    assert _run(["--ignore", "unregistered-submodule", str(script)]) == 0
    assert "no findings" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text('[tool.overt]\nignore = ["OVT401"]\n')
    assert _run([str(script)]) == 0
    assert "no findings" in capsys.readouterr().err


def test_missing_super_init_is_explained(tmp_path, capsys):
    model = textwrap.dedent('''
    class Net(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(64, 10)
            super().__init__()
        def forward(self, x):
            return self.fc(x)
    model = Net()
    ''')
    report = tmp_path / "r.json"
    assert _run(["--report", str(report), str(_script(tmp_path, model=model))]) == 1
    findings = json.loads(report.read_text())["findings"]
    assert [f["slug"] for f in findings] == ["missing-super-init"]
    assert "train.py:" in findings[0]["where"]
    assert "super().__init__() the first line" in findings[0]["message"]


def test_unsafe_load_is_flagged(tmp_path, capsys):
    tail = textwrap.dedent(f'''
    torch.save(model.state_dict(), {str(tmp_path / "m.pt")!r})
    state = torch.load({str(tmp_path / "m.pt")!r}, weights_only=False)
    state = torch.load({str(tmp_path / "m.pt")!r}, weights_only=True)
    ''')
    report = tmp_path / "r.json"
    # dataloader-starvation, the one timing-based guard, may fire on a loaded machine: ignored
    quiet = ["--ignore", "dataloader-starvation"]
    assert _run([*quiet, "--report", str(report), str(_script(tmp_path, tail=tail))]) == 1  # an error finding
    findings = json.loads(report.read_text())["findings"]
    assert [f["slug"] for f in findings] == ["unsafe-load"]
    assert "train.py:" in findings[0]["where"]


def test_missing_script_is_a_clear_error(tmp_path, capsys):
    assert run_cli.main([str(tmp_path / "nope.py")]) == 2
    assert "no such script" in capsys.readouterr().err


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "scripts").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_scripts_have_zero_findings(script, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert _run(["--report", str(report), str(script)]) == 0
    assert json.loads(report.read_text()) == {"findings": []}


@pytest.mark.slow
def test_spawned_dataloader_workers(tmp_path):
    """Workers started with 'spawn' re-import the script as __mp_main__: no guard there, no report."""
    script = tmp_path / "spawned.py"
    script.write_text(textwrap.dedent('''
        import torch
        from sklearn.datasets import load_digits
        from torch import nn
        from torch.utils.data import DataLoader, Dataset

        class Digits(Dataset):
            def __init__(self):
                d = load_digits()
                self.x = torch.tensor(d.data, dtype=torch.float32) / 16
                self.y = torch.tensor(d.target)
            def __len__(self):
                return 640
            def __getitem__(self, i):
                return self.x[i], self.y[i]

        if __name__ == "__main__":
            loader = DataLoader(Digits(), batch_size=32, shuffle=True, num_workers=2,
                                multiprocessing_context="spawn")
            model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for xb, yb in loader:
                loss = nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()  # no zero_grad: stale gradients
    '''))
    report = tmp_path / "r.json"
    proc = run_overt("run", "--report", str(report), str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert [f["slug"] for f in json.loads(report.read_text())["findings"]] == ["stale-gradients"]


def test_an_error_finding_fails_the_run_unless_allowed(tmp_path, capsys):
    """--no-stop lets the script finish (exit 0) with stale gradients, an error-level finding: the run
    exits 1 so a CI job fails; --allow-errors keeps the script's 0."""
    script = _script(tmp_path, reset="pass")
    assert _run(["--no-stop", str(script)]) == 1
    err = capsys.readouterr().err
    assert "stale-gradients" in err and "exit status 1: 1 error-level finding(s)" in err
    assert _run(["--no-stop", "--allow-errors", str(script)]) == 0
    assert _run(["--no-stop", "--ignore", "stale-gradients", str(script)]) == 0


def test_a_stopping_guard_is_said_once_with_the_fix_in_the_commands_own_terms(tmp_path, capsys):
    script = _script(tmp_path, reset="pass")
    assert _run([str(script)]) == 1
    err = capsys.readouterr().err
    assert err.count("were accumulated into after") == 1  # the finding, not the finding and then the error again
    assert "--ignore stale-gradients" in err and "ignore=[" not in err  # the CLI's spelling, not Python's


def test_a_closure_optimizer_is_judged_once_its_model_is_known(tmp_path, capsys):
    """With ``optimizer.step(closure)`` the model's first forward runs inside the step, after the
    step's pre-hook: the frozen-weights check waits for the model instead of judging none."""
    script = tmp_path / "closure.py"
    script.write_text(textwrap.dedent('''
        import torch
        from sklearn.datasets import load_digits
        from torch import nn

        d = load_digits()
        x, y = torch.tensor(d.data, dtype=torch.float32) / 16, torch.tensor(d.target)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        for name, p in model.named_parameters():
            if "weight" in name:  # a filter that matches every weight matrix
                p.requires_grad_(False)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss_fn = nn.CrossEntropyLoss()
        for i in range(8):
            def closure():
                opt.zero_grad()
                loss = loss_fn(model(x[i * 64:(i + 1) * 64]), y[i * 64:(i + 1) * 64])
                loss.backward()
                return loss
            opt.step(closure)
    '''))
    report = tmp_path / "guards.json"
    _run(["--report", str(report), "--ignore", "params-not-updating", str(script)])
    frozen = [f for f in json.loads(report.read_text())["findings"] if f["slug"] == "weights-frozen"]
    assert frozen and "--ignore weights-frozen" in frozen[0]["message"]  # overt run's spelling


def test_fixes_say_how_to_silence_in_the_faces_own_terms():
    """`overt run` takes `--ignore SLUG`, `overt.guard` and the framework callbacks `ignore=['slug']`, a
    run's config `ignore=[slug]`: a fix names the spelling of the face the user is in (issue 35)."""
    from overt.findings import Finding
    from overt.guards.options import GuardOptions
    from overt.guards.report import GuardError

    finding = Finding(slug="stale-gradients", message="m", where="w")
    assert "--ignore stale-gradients" in GuardError(finding, GuardOptions(silence_with="--ignore {slug}")
                                                    .silence("stale-gradients")).fix
    assert "ignore=[stale-gradients]" in GuardError(finding, GuardOptions().silence("stale-gradients")).fix
    assert "ignore=['stale-gradients']" in GuardError(finding).fix
