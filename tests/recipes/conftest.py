"""Fixtures for the built-in recipes: short in-process training runs, shared data paths (skipped when
../shared/data is absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_DATA, correctness_findings


def shared(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is not present (real data for this test lives in ../shared/data; see its README)")
    return path


def train(recipe: str, run_dir: Path, **overrides: Any) -> dict[str, Any]:
    """Train ``recipe`` in this process as `overt train` does, quietly and without checkpoints."""
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe as run

    settings = {"progress": "off", "checkpoint": False, "tensorboard": False, "run_dir": str(run_dir), **overrides}
    items = [f"{k}={json.dumps(v) if isinstance(v, (list, bool)) else v}" for k, v in settings.items()]
    module, cfg = resolve_run_config(recipe, items)
    summary = run(cfg, module)
    assert summary["status"] == "completed"
    if settings.get("guards", True):
        # the guards ran and found nothing (timing findings aside: they depend on how busy the machine is)
        assert correctness_findings(summary["findings"]) == [], summary["findings"]
    return summary


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """Finished runs, trained once per session on demand: ``runs("tiny")`` -> run directory."""
    root = tmp_path_factory.mktemp("recipe-runs")
    done: dict[str, Path] = {}
    settings = {
        "tiny": lambda: ("tiny", {"epochs": 12}),
        "resnet": lambda: ("resnet", {"limit": 160, "epochs": 1, "width": 8, "blocks": 1}),
        "house-prices": lambda: ("house-prices", {"csv": str(houses_csv(root)), "epochs": 4}),
        "sentiment": lambda: ("sentiment", {"data_dir": str(shared("sentiment-sentences")), "limit": 300,
                                            "epochs": 2, "dim": 16}),
        "mnist": lambda: ("mnist", {"data_dir": str(shared("mnist-t10k")), "limit": 256, "epochs": 1,
                                    "channels": 4, "hidden": 16}),
        "char-rnn": lambda: ("char-rnn", {"text": str(shared("tinyshakespeare/input.txt")), "limit_chars": 3000,
                                          "epochs": 1, "seq_len": 32, "hidden": 32, "embed": 16,
                                          "sample_chars": 40}),
    }

    def get(name: str) -> Path:
        if name not in done:
            recipe, overrides = settings[name]()
            train(recipe, root / name, **overrides)
            done[name] = root / name
        return done[name]

    return get


def houses_csv(root: Path) -> Path:
    from overt.recipes.house_prices import write_synthetic_csv

    path = root / "houses.csv"
    if not path.exists():
        write_synthetic_csv(path, rows=300, seed=0)
    return path


def assert_same_answers(a: list[Any], b: list[Any], atol: float = 1e-5) -> None:
    """Answers computed by two runtimes (ONNX Runtime, torch.export, eager torch): the classes and labels
    exactly, the probabilities and other numbers within ``atol`` -- never bit-equal floats, which
    differ in the last digit between runtimes (0.766514 vs 0.766513)."""
    from overt.export.exporter import same

    assert len(a) == len(b)
    assert [x.get("class") for x in a] == [y.get("class") for y in b]
    assert [x.get("label") for x in a] == [y.get("label") for y in b]
    bad = [i for i, (x, y) in enumerate(zip(a, b)) if not same(x, y, atol)]
    assert not bad, f"answers {bad[:5]} differ by more than {atol}: {a[bad[0]]} vs {b[bad[0]]}"
