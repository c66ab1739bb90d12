"""The suite's own rules: every subprocess a test starts is waited for with a timeout (a hung
child would otherwise block CI until its job limit), and no test module imports another test
module (shared helpers live in conftest.py or helper modules)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_RUNS = {"run", "check_output", "check_call", "call"}  # subprocess.X(...) that wait for the child


def _test_files(root: Path = TESTS) -> list[Path]:
    return [p for p in sorted(root.rglob("*.py")) if "projects" not in p.parts and "fixtures" not in p.parts]


def _waits_without_timeout(path: Path) -> list[str]:
    """``subprocess.run``/``check_output``/``check_call``/``call`` and a ``Popen``'s ``wait``/``communicate``
    without ``timeout=`` in ``path``."""
    tree = ast.parse(path.read_text())
    popens = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
              and node.value.func.attr == "Popen" for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f, timed = node.func, any(k.arg == "timeout" for k in node.keywords) or any(
            k.arg is None for k in node.keywords)  # **kwargs: passed through by a helper
        owner = f.value.id if isinstance(f.value, ast.Name) else None
        waits = (owner == "subprocess" and f.attr in _RUNS) or (
            f.attr in ("wait", "communicate") and (owner in popens or owner in ("proc", "process")))
        if waits and not timed and not (f.attr == "wait" and node.args):
            found.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}: {owner}.{f.attr}(...)")
    return found


def test_every_subprocess_is_waited_for_with_a_timeout():
    assert [line for p in _test_files() for line in _waits_without_timeout(p)] == []


def test_no_test_module_imports_another():
    found = []
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.") \
                    and node.module.rsplit(".", 1)[-1].startswith("test_"):
                found.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}: from {node.module} import ...")
    assert found == []
