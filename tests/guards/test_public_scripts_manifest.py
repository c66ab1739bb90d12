"""benchmarks/public_scripts (issue 33): the manifest the lead re-runs is well formed, without the
mirrors or the scripts (those are a benchmark, not a test): every entry names a pinned source, its
patch exists and touches only the entry's exported paths, its data kinds are ones run.py lays out,
and every known finding carries a verdict."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import struct
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "benchmarks" / "public_scripts"
VERDICTS = ("true", "false", "debatable", "timing")


def _run_module():
    spec = importlib.util.spec_from_file_location("public_scripts_run", HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_manifest_is_well_formed():
    manifest = json.loads((HERE / "manifest.json").read_text())
    standins = (HERE / "standins.py").read_text()
    assert len(manifest["scripts"]) >= 8
    for source in manifest["sources"].values():
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), source
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"]), source
    names = [e["name"] for e in manifest["scripts"]]
    assert len(names) == len(set(names))
    for e in manifest["scripts"]:
        assert e["source"] in manifest["sources"], e["name"]
        assert e["paths"] and e["script"], e["name"]
        for spec in e.get("data", []):
            assert spec["kind"] in ("mnist-idx", "copy", "lines", "tiny-lm", "cora-standin", "standin"), (e["name"], spec)
            if spec["kind"] == "standin":  # a generator of standins.py, by name
                assert re.search(rf"^def {spec['name']}\(", standins, flags=re.M), (e["name"], spec)
        for nb in e.get("notebooks", []):
            assert nb.endswith(".ipynb") and nb in e["paths"], (e["name"], nb)
        assert e.get("group", "tuned") in ("tuned", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6",
                                          "fresh7", "fresh8", "fresh9", "fresh10", "fresh11"), e["name"]
        for slug, verdict in e.get("known", {}).items():
            assert verdict.split(":")[0].split()[0] in VERDICTS, (e["name"], slug)
        if e.get("patch"):
            text = (HERE / "patches" / e["patch"]).read_text()
            touched = re.findall(r"^\+\+\+ b/(.+?)\s*$", text, flags=re.M)  # a path may hold spaces
            assert touched, e["patch"]
            made = [str(Path(nb).with_suffix(".py")) for nb in e.get("notebooks", [])]  # scripts made from notebooks
            for path in touched:  # a patch changes only files the entry exports (or makes from its notebooks)
                assert path in made or any(path == p or path.startswith(p.rstrip("/") + "/") for p in e["paths"]), (
                    e["name"], path)
    used = {e["patch"] for e in manifest["scripts"] if e.get("patch")}
    assert used == {p.name for p in (HERE / "patches").glob("*.patch")}


def test_a_notebook_becomes_the_script_run_all_would_run(tmp_path):
    """fresh5's notebooks: code cells in order, markdown left out, a magic or shell escape made ``pass``
    (a block may hold nothing else), a cell magic's cell commented out; the result compiles and runs."""
    run = _run_module()
    cells = [{"cell_type": "markdown", "source": ["# title"]},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "x = 1\n", "if False:\n", "    !pip install y"]},
             {"cell_type": "code", "source": "%%bash\necho hi"},
             {"cell_type": "code", "source": ["print(x + 1)"]}]
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps({"cells": cells}))
    script = run.notebook_to_script(notebook)
    assert script == tmp_path / "nb.py"
    text = script.read_text()
    assert "title" not in text and "    pass  # !pip install y" in text and "# echo hi" in text
    scope: dict = {}
    exec(compile(text, str(script), "exec"), scope)
    assert scope["x"] == 1


def test_mnist_layout_reads_back(tmp_path):
    data = REPO.parent / "shared" / "data" / "mnist-t10k"
    if not data.is_dir():
        pytest.skip("../shared/data/mnist-t10k is absent")
    run = _run_module()
    run.mnist_idx(tmp_path, train=100)
    raw = tmp_path / "MNIST" / "raw"
    magic, n, rows, cols = struct.unpack(">IIII", (raw / "train-images-idx3-ubyte").read_bytes()[:16])
    assert (magic, n, rows, cols) == (0x803, 100, 28, 28)
    labels = (raw / "t10k-labels-idx1-ubyte").read_bytes()
    assert struct.unpack(">II", labels[:8]) == (0x801, 2000)
    with gzip.open(data / "t10k-labels-idx1-ubyte.gz") as f:
        assert labels[8:] == f.read()[8 + 8000:]  # the test split is t10k's last 2,000 digits


def test_the_cora_standin_labels_whole_communities(tmp_path):
    """pygcn's cora.content stand-in: one row per paper of cora.cites, 1,433 binary words and one of
    7 classes, and two papers of one dense clique share their class."""
    pytest.importorskip("networkx")
    run = _run_module()
    cliques = [range(i * 10, i * 10 + 10) for i in range(14)]
    edges = [f"{a} {b}" for c in cliques for a in c for b in c if a < b]
    edges += [f"{c.start} {c.start + 10}" for c in cliques[:-1]]  # one edge between neighbouring cliques
    (tmp_path / "cora.cites").write_text("\n".join(edges) + "\n")
    run.cora_standin(tmp_path)
    rows = [line.split("\t") for line in (tmp_path / "cora.content").read_text().splitlines()]
    assert len(rows) == 140 and all(len(r) == 1 + 1433 + 1 for r in rows)
    assert all(set(r[1:-1]) <= {"0", "1"} for r in rows)
    label = {r[0]: r[-1] for r in rows}
    assert len(set(label.values())) == 7
    assert all(len({label[str(p)] for p in c}) == 1 for c in cliques)


def test_each_drawn_group_is_split_in_two_halves_of_its_own_scripts():
    """split-fresh2.json, split-fresh3.json and split-fresh4.json: the seeded draws cover exactly their group's scripts, and
    run.py's --group GROUP-dev / GROUP-test selects each half."""
    run = _run_module()
    manifest = json.loads((HERE / "manifest.json").read_text())
    for group, seed in run.SPLIT_SEEDS.items():
        halves = json.loads((HERE / f"split-{group}.json").read_text())
        assert halves["seed"] == seed
        names = {e["name"] for e in manifest["scripts"] if e.get("group") == group}
        assert set(halves["dev"]) | set(halves["test"]) == names and not set(halves["dev"]) & set(halves["test"])
        for half in ("dev", "test"):
            chosen = {e["name"] for e in manifest["scripts"] if run.in_group(e, f"{group}-{half}")}
            assert chosen == set(halves[half])


def test_the_full_size_mnist_standin_reads_back(tmp_path):
    """standins.py mnist_gz60k (fresh4): the four gzipped IDX files at MNIST's full counts, the training
    file made only of t10k's first 8,000 digits and the test file only of its last 2,000."""
    data = REPO.parent / "shared" / "data" / "mnist-t10k"
    if not data.is_dir():
        pytest.skip("../shared/data/mnist-t10k is absent")
    spec = importlib.util.spec_from_file_location("public_scripts_standins", HERE / "standins.py")
    standins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standins)
    standins.mnist_gz60k(tmp_path)
    with gzip.open(data / "t10k-labels-idx1-ubyte.gz") as f:
        t10k = f.read()[8:]
    for part, n, first in (("train", 60000, t10k[:8000]), ("t10k", 10000, t10k[8000:])):
        with gzip.open(tmp_path / f"{part}-images-idx3-ubyte.gz") as f:
            assert struct.unpack(">IIII", f.read(16)) == (2051, n, 28, 28)
        with gzip.open(tmp_path / f"{part}-labels-idx1-ubyte.gz") as f:
            labels = f.read()
        assert struct.unpack(">II", labels[:8]) == (2049, n) and labels[8:8 + len(first)] == first
