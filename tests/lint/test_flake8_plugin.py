"""The flake8 plugin, through flake8 itself (entry point discovery) and in-process."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overt.lint.flake8_plugin import Plugin

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def _entry_point_dir(tmp_path: Path) -> Path:
    """A dist-info that declares the same entry point as pyproject.toml, so flake8
    finds the plugin without installing overt into the shared environment."""
    text = (REPO / "pyproject.toml").read_text()
    assert 'OVT = "overt.lint.flake8_plugin:Plugin"' in text
    dist = tmp_path / "overt_lint_plugin-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: overt-lint-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[flake8.extension]\nOVT = overt.lint.flake8_plugin:Plugin\n")
    return tmp_path


def _installed() -> bool:
    """Whether overt's own flake8 entry point is already installed (e.g. `pip install -e .`)."""
    from importlib.metadata import entry_points

    return any(ep.value == "overt.lint.flake8_plugin:Plugin" for ep in entry_points(group="flake8.extension"))


def test_flake8_runs_the_plugin(tmp_path):
    pytest.importorskip("flake8")
    paths = [str(REPO)] if _installed() else [str(_entry_point_dir(tmp_path)), str(REPO)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    target = FIXTURES / "stale-gradients" / "bad.py"
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "OVT", str(target)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    expected = [e.split(": ")[0] for e in (FIXTURES / "stale-gradients" / "bad.txt").read_text().split("\n") if e]
    assert [line.split(":", 1)[1].rsplit(":", 1)[0] for line in lines] == expected
    assert all(" OVT101 stale-gradients " in line for line in lines)


def test_plugin_in_process_honours_overt_ignore():
    source = (FIXTURES / "unsafe-load" / "bad.py").read_text()
    results = list(Plugin(ast.parse(source), "bad.py", source.splitlines(keepends=True)).run())
    assert [(r[0], r[1]) for r in results] == [(4, 8), (5, 7), (6, 8)]
    assert results[0][2].startswith("OVT601 unsafe-load ")
    silenced = source.replace("# BAD: unsafe-load", "# overt: ignore[unsafe-load]")
    assert list(Plugin(ast.parse(silenced), "bad.py", silenced.splitlines(keepends=True)).run()) == []
