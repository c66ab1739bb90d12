"""The layering is one-way: every package imports only packages in layers below its own (so there
is no package cycle), the engine none of its plug-ins and no torch.distributed.  Checked two ways:
what a fresh interpreter imports, and every import statement in the source (lazy imports inside
functions included).  docs/architecture.md draws LAYERS."""

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
                "overt.testing", "overt.scaffold", "overt.distributed", "overt.doctor")
ABOVE_CHECKPOINT = ("overt.cli", "overt.recipes", "overt.compose", "overt.report", "overt.predict", "overt.export",
                    "overt.testing", "overt.scaffold", "overt.distributed", "overt.doctor")


def _imported_after(modules: list[str]) -> list[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('overt'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
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


#: the packages (and top-level modules) of overt, bottom layer first; a module may import modules of
#: its own package and of lower layers only.  ``overt`` itself (the package root: ``__version__``
#: and the lazily loaded public names) is left out.
LAYERS: list[tuple[str, ...]] = [
    ("overt.errors", "overt.catalog", "overt.text", "overt.frames", "overt.modefree"),
    ("overt.findings", "overt.torchrun", "overt.config", "overt.pyproject", "overt.preprocessing", "overt.record"),
    ("overt.command", "overt.serving"),
    ("overt.engine",),
    ("overt.run", "overt.lint"),
    ("overt.checkpoint", "overt.guards", "overt.report"),
    ("overt.distributed", "overt.recipes", "overt.integrations"),
    ("overt.compose", "overt.doctor", "overt.predict"),
    ("overt.export", "overt.testing", "overt.scaffold"),
    ("overt.cli",),
    ("overt.__main__",),
]
LAYER_OF = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _unit(module: str) -> str | None:
    """The layered unit a module belongs to: its package (``overt.x``) or top-level module."""
    parts = module.split(".")
    if parts[0] != "overt" or len(parts) == 1:
        return None
    return f"overt.{parts[1]}"


def _all_imports(root: Path = OVERT) -> list[tuple[str, str, str]]:
    """(file, importing unit, imported unit) for every import of overt in ``root`` (overt/)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        unit = _unit(".".join(rel.parts))
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                target = _unit(name)
                if target is not None and target != unit:
                    out.append((str(rel), unit, target))
    return out


def test_every_package_is_in_a_layer():
    units = {_unit(".".join(p.relative_to(OVERT.parent).with_suffix("").parts)) for p in OVERT.rglob("*.py")}
    assert sorted(u for u in units if u not in LAYER_OF and u != "overt.__init__") == []


def _upward(root: Path = OVERT) -> list[str]:
    return [f"{file}: {unit} imports {target}" for file, unit, target in _all_imports(root)
            if LAYER_OF[target] >= LAYER_OF[unit]]


def _cycles(root: Path = OVERT) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for _, unit, target in _all_imports(root):
        graph.setdefault(unit, set()).add(target)
    seen: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        if seen.get(node) == 1:
            return path + [node]
        if seen.get(node) == 2:
            return None
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt, path + [node])
            if cycle:
                return cycle
        seen[node] = 2
        return None

    return [c for c in (visit(n, []) for n in sorted(graph)) if c]


def test_no_import_points_up_or_sideways():
    assert _upward() == []


def test_there_is_no_package_cycle():
    assert _cycles() == []


def test_the_engine_never_imports_torch_distributed():
    found = {name: sorted(m for m in mods if m.startswith("torch.distributed"))
             for name, mods in _imports_in_source("overt.engine").items()}
    assert {name: mods for name, mods in found.items() if mods} == {}


def test_an_upward_import_and_a_cycle_are_caught(tmp_path):
    """The checks themselves, on a planted tree: the engine importing the distributed package
    (lazily, inside a function) points up and closes a cycle with distributed -> engine."""
    root = tmp_path / "overt"
    (root / "engine").mkdir(parents=True)
    (root / "distributed").mkdir()
    (root / "engine" / "loop.py").write_text("def f():\n    from overt.distributed.parallel import DDP\n")
    (root / "distributed" / "parallel.py").write_text("from overt.engine.parallel import Parallel\n")
    assert _upward(root) == ["overt/engine/loop: overt.engine imports overt.distributed"]
    assert _cycles(root)[0] == ["overt.distributed", "overt.engine", "overt.distributed"]


#: the run directory's own names (overt.run.layout): outside overt/run/ a run directory's paths come
#: from overt.run.rundir.RunDir, so that every write into one goes through its link-refusing writes
RUN_FILE_NAMES = {"CONFIG", "RECIPE_META", "INPUTS", "RECIPE_SOURCE", "METRICS", "TENSORBOARD", "STATUS", "GUARDS",
                  "CHECKPOINTS", "WEIGHTS", "SUMMARY", "LOCK", "REPORT", "PLOTS", "WANDB", "MLFLOW", "checkpoints_dir",
                  "checkpoint_root", "run_dir_of_checkpoint"}
RUN_FILE_LITERALS = {"config.yaml", "recipe_meta.json", "inputs.json", "recipe_source.json", "metrics.jsonl", "tb",
                     "status.json", "guards.json", "checkpoints", "model.safetensors", "summary.json", ".lock",
                     "plots", "wandb", "mlflow.json"}
#: (file, literal): a path built with a run file's name that is not in a run directory
NOT_A_RUN_DIR = {("overt/integrations/mlflow.py", "model.safetensors")}  # a temporary folder for the artifact


def _run_paths_built_by_hand(root: Path = OVERT) -> list[str]:
    """Every place outside overt/run/ that imports a run file's name from the layout, or joins a path
    with a run file's name (``x / "checkpoints"``)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root.parent))
        if rel.startswith("overt/run/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in ("overt.run.layout", "overt.run.lock"):
                found += [f"{rel}:{node.lineno} imports {a.name}" for a in node.names if a.name in RUN_FILE_NAMES]
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                    isinstance(node.right, ast.Constant) and node.right.value in RUN_FILE_LITERALS and \
                    (rel, node.right.value) not in NOT_A_RUN_DIR:
                found.append(f"{rel}:{node.lineno} joins {node.right.value!r}")
    return found


def test_no_run_directory_path_is_built_outside_overt_run():
    assert _run_paths_built_by_hand() == []


def test_a_run_directory_path_built_by_hand_is_caught(tmp_path):
    root = tmp_path / "overt"
    (root / "predict").mkdir(parents=True)
    (root / "run").mkdir()
    (root / "predict" / "p.py").write_text("from overt.run.layout import WEIGHTS, json_safe\n"
                                           "def f(run):\n    return run / 'checkpoints', run / WEIGHTS\n")
    (root / "run" / "rundir.py").write_text("def f(run):\n    return run / 'checkpoints'\n")
    assert _run_paths_built_by_hand(root) == ["overt/predict/p.py:1 imports WEIGHTS",
                                              "overt/predict/p.py:3 joins 'checkpoints'"]


#: the modules that read which process this is (torchrun's environment, the process group's rank and
#: size); every other module asks an ``overt.torchrun.Topology`` (a run's: ``trainer.parallel.topology``)
IDENTITY_OWNERS = ("overt/torchrun.py", "overt/distributed/group.py")
_IDENTITY_CALLS = {"get_rank", "get_world_size", "from_environ", "world"}
_IDENTITY_VARIABLES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}


def _identity_reads(root: Path = OVERT) -> list[str]:
    """Every direct read of process identity in ``root`` outside :data:`IDENTITY_OWNERS`: a call of
    ``dist.get_rank``/``get_world_size``, ``DistEnv.from_environ``, ``world()``, or a read of a
    torchrun variable (``os.environ["WORLD_SIZE"]``, ``.get("RANK")``, ``"WORLD_SIZE" in os.environ``)."""
    def variable(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in _IDENTITY_VARIABLES

    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel in IDENTITY_OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            what = None
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in _IDENTITY_CALLS:
                    what = f"{name}()"
                elif name in ("get", "getenv") and node.args and variable(node.args[0]):
                    what = f"{name}({node.args[0].value!r})"
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and variable(node.slice):
                what = f"[{node.slice.value!r}]"
            elif isinstance(node, ast.Compare) and variable(node.left) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
                what = f"{node.left.value!r} in ..."
            if what:
                out.append(f"{rel}:{node.lineno}: {what}")
    return out


def test_process_identity_is_read_only_by_its_owners():
    assert _identity_reads() == []


def test_a_direct_read_of_process_identity_is_caught(tmp_path):
    root = tmp_path / "overt"
    (root / "cli").mkdir(parents=True)
    (root / "cli" / "train.py").write_text(
        "import os\nimport torch.distributed as dist\n"
        "def f():\n    return os.environ['WORLD_SIZE'], os.environ.get('RANK'), 'WORLD_SIZE' in os.environ, "
        "dist.get_rank()\n")
    assert _identity_reads(root) == ["overt/cli/train.py:4: ['WORLD_SIZE']", "overt/cli/train.py:4: get('RANK')",
                                     "overt/cli/train.py:4: 'WORLD_SIZE' in ...", "overt/cli/train.py:4: get_rank()"]


def _module_imports(package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (lazy imports included; ``if TYPE_CHECKING:``
    blocks left out: they never run)."""
    graph: dict[str, set[str]] = {}
    folder = OVERT / package.split(".", 1)[1]
    for path in sorted(folder.rglob("*.py")):
        name = ".".join(path.relative_to(OVERT.parent).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                       for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            graph.setdefault(name, set()).update(n for n in names if n.startswith(package + ".") and n != name)
    return graph


def test_the_doctors_modules_import_one_another_without_a_cycle():
    """readiness -> note -> registry -> probes never leads back (a probe formats its evidence with
    result.py's helpers, not the note's)."""
    graph = _module_imports("overt.doctor")
    done: set[str] = set()

    def cycle(node: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if node in path:
            return path[path.index(node):] + (node,)
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = cycle(nxt, path + (node,))
            if found:
                return found
        done.add(node)
        return None

    assert [c for c in (cycle(n, ()) for n in sorted(graph)) if c] == []
