"""The command line: output formats, exit codes, silencing, configuration, --fix."""

from __future__ import annotations

import ast
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from overt.lint.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]

STALE = """\
import torch
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(4, 2)).sum().backward()
    opt.step(){comment}
state = torch.load("x.pt"){comment2}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_text_output_and_exit_code_1(tmp_path, capsys):
    p = _write(tmp_path, "train.py", STALE.format(comment="", comment2=""))
    assert main([str(p)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"{p.as_posix()}:6:5: OVT101 stale-gradients " + out[0].split("stale-gradients ", 1)[1])
    assert "zero_grad()" in out[0]
    assert out[1].startswith(f"{p.as_posix()}:7:9: OVT601 unsafe-load ")


def test_clean_file_exits_0(capsys):
    assert main([str(FIXTURES / "clean")]) == 0
    assert capsys.readouterr().out == ""


def test_json_format(tmp_path, capsys):
    p = _write(tmp_path, "train.py", STALE.format(comment="", comment2=""))
    assert main([str(p), "--format", "json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert [(i["line"], i["col"], i["code"], i["slug"]) for i in items] == [
        (6, 5, "OVT101", "stale-gradients"), (7, 9, "OVT601", "unsafe-load")]
    assert {"path", "line", "col", "code", "slug", "message"} <= set(items[0])
    assert items[0]["path"] == p.as_posix()


def test_sarif_format(tmp_path, capsys):
    p = _write(tmp_path, "train.py", STALE.format(comment="", comment2=""))
    assert main([str(p), "--format", "sarif"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["OVT101", "OVT601"]
    for r in results:
        assert ids[r["ruleIndex"]] == r["ruleId"]
        region = r["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] in (6, 7)
    assert results[0]["level"] == "error"


def test_usage_error_exits_2(capsys):
    assert main(["--format", "xml", "x.py"]) == 2
    assert main(["--select", "no-such-rule", str(FIXTURES / "clean")]) == 2
    err = capsys.readouterr().err
    assert "unknown rule 'no-such-rule'" in err and "Traceback" not in err


def test_missing_path_exits_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope.py")]) == 2
    assert "nope.py: no such file or directory" in capsys.readouterr().err


def test_unparseable_file_is_named_without_traceback(tmp_path, capsys):
    _write(tmp_path, "ok.py", "x = 1\n")
    bad = _write(tmp_path, "broken.py", "def f(:\n    pass\n")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{bad.as_posix()}:1:" in err and "cannot parse" in err and "Traceback" not in err


def test_line_silencing(tmp_path, capsys):
    text = STALE.format(comment="  # overt: ignore[stale-gradients]", comment2="  # noqa: OVT601")
    assert main([str(_write(tmp_path, "a.py", text))]) == 0
    text = STALE.format(comment="  # overt: ignore[unsafe-load]", comment2="  # noqa: E501")
    assert main([str(_write(tmp_path, "b.py", text)), "--format", "json"]) == 1
    slugs = [i["slug"] for i in json.loads(capsys.readouterr().out)]
    assert slugs == ["stale-gradients", "unsafe-load"]
    text = STALE.format(comment="  # overt: ignore", comment2="  # noqa")
    assert main([str(_write(tmp_path, "c.py", text))]) == 0
    text = "# overt: ignore-file[OVT101]\n" + STALE.format(comment="", comment2="")
    assert main([str(_write(tmp_path, "d.py", text)), "--format", "json"]) == 1
    assert [i["slug"] for i in json.loads(capsys.readouterr().out)] == ["unsafe-load"]


def test_command_line_selection(tmp_path, capsys):
    p = _write(tmp_path, "train.py", STALE.format(comment="", comment2=""))
    assert main([str(p), "--select", "unsafe-load", "--format", "json"]) == 1
    assert [i["slug"] for i in json.loads(capsys.readouterr().out)] == ["unsafe-load"]
    assert main([str(p), "--ignore", "OVT101,unsafe-load"]) == 0
    assert main([str(p), "--exit-zero"]) == 0


def test_pyproject_configuration(tmp_path, capsys):
    _write(tmp_path, "pyproject.toml", """
[tool.overt]
ignore = ["unsafe-load"]
exclude = ["legacy/"]
[tool.overt.per-file-ignores]
"scripts/*.py" = ["OVT101"]
""")
    body = STALE.format(comment="", comment2="")
    _write(tmp_path, "train.py", body)
    _write(tmp_path, "scripts/run.py", body)
    _write(tmp_path, "legacy/old.py", body)
    assert main([str(tmp_path), "--format", "json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert [(Path(i["path"]).name, i["slug"]) for i in items] == [("train.py", "stale-gradients")]


def test_pyproject_select_and_bad_value(tmp_path, capsys):
    _write(tmp_path, "pyproject.toml", '[tool.overt]\nselect = ["OVT601"]\n')
    _write(tmp_path, "train.py", STALE.format(comment="", comment2=""))
    assert main([str(tmp_path), "--format", "json"]) == 1
    assert [i["slug"] for i in json.loads(capsys.readouterr().out)] == ["unsafe-load"]
    _write(tmp_path, "pyproject.toml", '[tool.overt]\nignore = ["stale-gradient"]\n')
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown rule 'stale-gradient'" in err and "stale-gradients" in err


def test_gitignore_is_honoured(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, ".gitignore", "build/\n*_gen.py\n")
    body = STALE.format(comment="", comment2="")
    _write(tmp_path, "src/train.py", body)
    _write(tmp_path, "build/train.py", body)
    _write(tmp_path, "src/model_gen.py", body)
    assert main([str(tmp_path / "src"), "--format", "json", "--select", "OVT101"]) == 1
    paths = {Path(i["path"]).relative_to(tmp_path).as_posix() for i in json.loads(capsys.readouterr().out)}
    assert paths == {"src/train.py"}


def test_ignored_directory_says_what_was_skipped_and_how_to_include_it(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, ".gitignore", "build/\n")
    _write(tmp_path, "build/train.py", STALE.format(comment="", comment2=""))
    _write(tmp_path, "build/util.py", "x = 1\n")
    assert main([str(tmp_path / "build")]) == 0
    err = capsys.readouterr().err
    assert "2 Python files skipped (2 git-ignored by" in err and ".gitignore" in err
    assert "--no-ignore" in err
    assert main([str(tmp_path / "build"), "--no-ignore", "--select", "OVT101"]) == 1
    assert "1 finding in 2 files" in capsys.readouterr().err


def test_config_excluded_files_are_explained(tmp_path, capsys):
    _write(tmp_path, "pyproject.toml", '[tool.overt]\nexclude = ["*_gen.py"]\n')
    _write(tmp_path, "src/model_gen.py", STALE.format(comment="", comment2=""))
    assert main([str(tmp_path / "src"), "--config", str(tmp_path / "pyproject.toml")]) == 0
    assert "1 Python file skipped (1 excluded by `exclude` in [tool.overt])" in capsys.readouterr().err


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    # far more output than a pipe buffers, so writing fails once `head` has gone
    p = _write(tmp_path, "many.py", "import torch\n" + 'torch.load("a.pt")\n' * 3000)
    line = f"{shlex.quote(sys.executable)} -m overt lint {shlex.quote(str(p))} | head -1"  # paths may hold spaces
    proc = subprocess.run(line, shell=True, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr


def test_notebook_reported_by_cell(capsys):
    assert main([str(FIXTURES / "notebooks"), "--format", "json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert [(i["cell"], i["line"], i["slug"]) for i in items] == [(3, 5, "stale-gradients"), (4, 1, "unsafe-load")]
    assert main([str(FIXTURES / "notebooks" / "bad.ipynb")]) == 1
    assert ":cell 3:5:9: OVT101 stale-gradients" in capsys.readouterr().out


def test_broken_notebook_is_named_and_skipped_unless_strict(tmp_path, capsys):
    _write(tmp_path, "nb.ipynb", "{not json")
    assert main([str(tmp_path)]) == 0
    assert "nb.ipynb: not valid notebook JSON" in capsys.readouterr().err
    assert main([str(tmp_path), "--strict"]) == 2
    assert "nb.ipynb: not valid notebook JSON" in capsys.readouterr().err


FIXABLE = """\
import torch
device = torch.device("cpu")
x = torch.randn(3)
x.to(device)
model = torch.nn.Linear(3, 1)
y = model.forward(x)
model.load_state_dict(torch.load("w.pt", map_location="cpu",))
other = torch.load("w.pt")
model.load_state_dict(other)
"""


def test_fix_rewrites_and_reports(tmp_path, capsys):
    p = _write(tmp_path, "train.py", FIXABLE)
    p.chmod(0o751)
    assert main([str(p), "--fix"]) == 0
    out = capsys.readouterr().out
    assert out.count("fixed") == 4 and "OVT403 to-without-assign" in out
    fixed = p.read_text()
    ast.parse(fixed)
    assert "x = x.to(device)" in fixed
    assert "y = model(x)" in fixed
    assert 'torch.load("w.pt", map_location="cpu", weights_only=True)' in fixed
    assert 'torch.load("w.pt", weights_only=True)' in fixed
    assert p.stat().st_mode & 0o777 == 0o751  # written atomically, keeping the file's mode
    assert [q.name for q in tmp_path.iterdir()] == ["train.py"]  # no temporary file left behind
    assert main([str(p)]) == 0


def test_fix_never_makes_a_load_of_other_objects_weights_only(tmp_path, capsys):
    src = "import torch\nstats = torch.load('stats.pt')\nprint(stats['mean'])\n"
    p = _write(tmp_path, "t.py", src)
    assert main([str(p), "--fix"]) == 1  # still reported: the fix is the user's call
    assert p.read_text() == src


def test_fix_leaves_unfixable_findings(tmp_path, capsys):
    p = _write(tmp_path, "t.py", "import torch\ntorch.load('a', weights_only=False)\n")
    assert main([str(p), "--fix", "--min-severity", "info"]) == 1
    assert p.read_text() == "import torch\ntorch.load('a', weights_only=False)\n"


def test_lint_does_not_import_torch(tmp_path):
    code = ("import sys; from overt.cli import main; rc = main(['lint', sys.argv[1]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "clean")], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_list_rules_names_every_static_entry(capsys):
    from overt.catalog import ENTRIES

    assert main(["--list-rules"]) == 0
    out = capsys.readouterr().out
    for e in ENTRIES:
        assert (e.slug in out) == e.static


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "overt lint" in capsys.readouterr().out


def test_pre_commit_hook_definition():
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "overt-lint")
    assert hook["entry"] == "overt lint" and {"python", "jupyter"} <= set(hook["types_or"])


def test_notebook_syntax_error_names_the_cell(tmp_path, capsys):
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": src}
             for src in (["import torch\n"], ["x = (1,\n", "y = 2\n"])]
    _write(tmp_path, "nb.ipynb", json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert main([str(tmp_path), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "nb.ipynb:cell 2:1:" in err and "cannot parse" in err and "Traceback" not in err


def test_a_broken_cell_is_skipped_and_the_others_are_linted(tmp_path, capsys):
    """A notebook is run cell by cell: one cell that does not parse is named on stderr and skipped, the
    other cells' findings are reported, and the run does not fail with exit 2 (unless --strict)."""
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": src}
             for src in (["import torch\n"], ["x = (1,\n"], ["t = torch.randn(3)\n", "t.to('cpu')\n"])]
    _write(tmp_path, "nb.ipynb", json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert main([str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "nb.ipynb:cell 2:1:" in captured.err and "cell skipped" in captured.err
    assert "nb.ipynb:cell 3:2:" in captured.out and "to-without-assign" in captured.out


def test_shell_line_continued_with_a_backslash_parses(tmp_path, capsys):
    """Colab's `!pip install a \\` + indented `b`: the continuation lines are shell too."""
    src = ["!pip install torch \\\n", "    torchvision \\\n", "    torchaudio\n", "import torch\n",
           "t = torch.randn(3)\n", "t.to('cpu')\n"]
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": src}]
    _write(tmp_path, "nb.ipynb", json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert main([str(tmp_path), "--strict"]) == 1
    captured = capsys.readouterr()
    assert "cell 1:6:" in captured.out and "cannot parse" not in captured.err


def test_coding_cookie_and_bom_are_read_and_kept_by_fix(tmp_path, capsys):
    latin = tmp_path / "latin.py"
    latin.write_bytes(b'# -*- coding: latin-1 -*-\nimport torch\nname = "caf\xe9"\nm = torch.nn.Linear(1, 1)\nm.load_state_dict(torch.load("m.pt"))\n')
    bom = tmp_path / "bom.py"
    bom.write_bytes(b'\xef\xbb\xbfimport torch\nx = torch.randn(2)\nx.to("cpu")\n')
    assert main([str(tmp_path), "--format", "json"]) == 1
    assert sorted(i["slug"] for i in json.loads(capsys.readouterr().out)) == ["to-without-assign", "unsafe-load"]
    assert main([str(tmp_path), "--fix"]) == 0
    assert latin.read_bytes().endswith(b'"caf\xe9"\nm = torch.nn.Linear(1, 1)\nm.load_state_dict(torch.load("m.pt", weights_only=True))\n')
    assert bom.read_bytes() == b'\xef\xbb\xbfimport torch\nx = torch.randn(2)\nx = x.to("cpu")\n'


def test_json_and_sarif_carry_why_and_fix_on_their_own(tmp_path, capsys):
    p = tmp_path / "t.py"
    p.write_text("import torch\nm = torch.nn.Linear(1, 1)\nm.load_state_dict(torch.load('m.pt'))\n")
    assert main([str(p), "--format", "json"]) == 1
    [item] = json.loads(capsys.readouterr().out)
    assert item["fix"].startswith("pass weights_only=True")
    assert item["why"] and item["autofix"] == "torch.load(...) -> torch.load(..., weights_only=True)"
    assert main([str(p), "--format", "sarif"]) == 1
    [result] = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert result["properties"]["fix"] == item["fix"] and result["properties"]["why"] == item["why"]
