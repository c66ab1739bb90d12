"""The pytest plugin (marker and fixtures) and `overt init`'s project, each in its own pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, run_overt


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest in ``folder`` with this checkout's overt and its plugin loaded as the entry point would."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "overt.testing.plugin", "-p", "no:cacheprovider",
                           *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def test_the_package_registers_the_plugin_as_a_pytest11_entry_point():
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["project"]["entry-points"]["pytest11"] == {"overt": "overt.testing.plugin"}
    assert "onnxruntime" in " ".join(data["project"]["optional-dependencies"]["export"])


def test_marker_and_fixtures(tmp_path):
    (tmp_path / "test_it.py").write_text(
        "import pytest\n"
        "from overt import testing\n\n"
        "@pytest.mark.overt('tiny', epochs=2)\n"
        "def test_fixtures(overt_recipe, overt_train):\n"
        "    assert overt_recipe.config.epochs == 2\n"
        "    summary = overt_train(epochs=3)\n"
        "    assert summary['epochs'] == 3 and summary['run_dir']\n\n"
        "def test_shared_data(overt_shared_data):\n"
        "    overt_shared_data('no-such-data-set')\n\n"
        "def test_unmarked(overt_recipe):\n"
        "    pass\n")
    proc = pytest_in(tmp_path, "-rs", "--strict-markers")
    assert "1 passed" in proc.stdout and "1 skipped" in proc.stdout and "1 error" in proc.stdout, proc.stdout
    assert "no-such-data-set is not present" in proc.stdout
    assert "without @pytest.mark.overt" in proc.stdout


def test_init_creates_a_project_that_passes_its_own_tests_and_lint(tmp_path):
    proc = run_overt("init", "demo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    project = tmp_path / "demo"
    for name in ("recipe.py", "config.yaml", "tests/test_smoke.py", "pyproject.toml", ".pre-commit-config.yaml"):
        assert (project / name).is_file(), name
    assert "[tool.overt]" in (project / "pyproject.toml").read_text()
    tests = pytest_in(project)
    assert tests.returncode == 0 and "5 passed" in tests.stdout, tests.stdout + tests.stderr
    lint = run_overt("lint", ".", cwd=project)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    again = run_overt("init", "demo", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_an_init_project_can_be_edited_and_trained_again(tmp_path):
    """The config pins no run folder: the usual edit-and-retrain loop is not refused (exit 2)."""
    assert run_overt("init", "demo", cwd=tmp_path).returncode == 0
    project = tmp_path / "demo"
    settings = [line.split("#")[0].strip() for line in (project / "config.yaml").read_text().splitlines()]
    assert not any(line.startswith("name:") for line in settings)
    assert "https://github.com/)" not in (project / "README.md").read_text()  # no placeholder link
    for epochs in ("1", "2"):
        proc = run_overt("train", "config.yaml", f"epochs={epochs}", "progress=off", cwd=project)
        assert proc.returncode == 0, proc.stderr
    assert len(list((project / "runs").glob("recipe-*"))) == 2
