"""The layering is one-way: the engine imports none of its plug-ins, the checkpoint store no
command line.  Checked two ways: what a fresh interpreter imports, and every import statement
in the source (lazy imports inside functions included)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

OVERT = Path(__file__).resolve().parents[2] / "overt"
ABOVE_ENGINE = ("overt.guards", "overt.checkpoint", "overt.run", "overt.cli", "overt.recipes", "overt.compose",
                "overt.lint", "overt.report", "overt.integrations", "overt.predict", "overt.export",
                "overt.testing", "overt.scaffold")
ABOVE_CHECKPOINT = ("overt.cli", "overt.recipes", "overt.compose", "overt.report", "overt.predict", "overt.export",
                    "overt.testing", "overt.scaffold")


def _imported_after(modules: list[str]) -> list[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('overt'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _package_modules(package: str) -> list[str]:
    folder = OVERT / package.split(".", 1)[1]
    return [f"{package}.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"] + [package]


def _imports_in_source(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((OVERT / package.split(".", 1)[1]).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.setdefault(path.name, set()).add(node.module)
            elif isinstance(node, ast.Import):
                found.setdefault(path.name, set()).update(a.name for a in node.names)
    return found


def _violations(imported: list[str] | set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in imported if any(m == f or m.startswith(f + ".") for f in forbidden))


def test_importing_the_engine_imports_none_of_its_plug_ins():
    loaded = _imported_after(_package_modules("overt.engine"))
    assert "overt.engine.loop" in loaded
    assert _violations(loaded, ABOVE_ENGINE) == []


def test_importing_the_checkpoint_store_imports_no_command_line_or_recipes():
    loaded = _imported_after(_package_modules("overt.checkpoint"))
    assert "overt.checkpoint.callback" in loaded
    assert _violations(loaded, ABOVE_CHECKPOINT) == []


@pytest.mark.parametrize("package,forbidden", [("overt.engine", ABOVE_ENGINE),
                                               ("overt.checkpoint", ABOVE_CHECKPOINT),
                                               ("overt.run", ("overt.checkpoint", "overt.guards", *ABOVE_CHECKPOINT))])
def test_no_source_line_imports_upwards(package, forbidden):
    bad = {name: _violations(mods, forbidden) for name, mods in _imports_in_source(package).items()}
    assert {name: mods for name, mods in bad.items() if mods} == {}
