"""The files of a new project, and writing them."""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from overt.errors import ConfigError

RECIPE = '''"""{name}: a classifier on scikit-learn's breast-cancer data (ships with scikit-learn).

Train it:  overt train config.yaml          (or: overt train recipe.py lr=0.01)
Test it:   pytest
Lint it:   overt lint .
"""

import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt

defaults = {{"epochs": 20, "batch_size": 32, "lr": 3e-3, "hidden": 32, "val_fraction": 0.25, "split_seed": 0,
            "monitor": "val/accuracy", "monitor_mode": "max"}}


def load_data(val_fraction, split_seed):
    """Raw train and validation splits (30 measurements per tumour, in their own units) and labels."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    x, y = load_breast_cancer(return_X_y=True)
    return train_test_split(x, y, test_size=val_fraction, random_state=split_seed, stratify=y)


def preprocessing(x_train):
    """The one definition of how raw inputs become the model's: standardised with the training split's
    statistics only.  Training uses it below; `overt predict` and `overt export` apply the same object
    to raw rows (it is saved with the run), so there is no second copy to drift."""
    return overt.Preprocessing(width=30, shift=x_train.mean(0).tolist(), scale=x_train.std(0).tolist(),
                               task="classification", labels=["malignant", "benign"])


def build_model(cfg, meta=None):
    return nn.Sequential(nn.Linear(30, cfg.hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(cfg.hidden, 2))


def build(cfg):
    x_tr, x_va, y_tr, y_va = load_data(cfg.val_fraction, cfg.split_seed)
    prep = preprocessing(x_tr)
    model = build_model(cfg)
    return overt.Recipe(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=cfg.lr),
        loss_fn=nn.CrossEntropyLoss(),
        train_data=TensorDataset(prep.tensor(x_tr), torch.tensor(y_tr)),
        val_data=TensorDataset(prep.tensor(x_va), torch.tensor(y_va)),
        metrics={{"accuracy": overt.metrics.accuracy}},
        preprocessing=prep,
        raw_val=list(x_va),
    )
'''

CONFIG = '''# overt train config.yaml [key=value ...]
recipe: recipe.py
epochs: 20
# each training writes a new folder, runs/recipe-<date>-<time> (printed when it starts), so you can
# edit this file and train again; `name: {name}` would pin runs/{name}, which holds one finished run
'''

SMOKE_TEST = '''"""Smoke tests: the recipe learns, memorises one batch, is reproducible and survives a checkpoint."""

from pathlib import Path

import pytest

from overt import testing

RECIPE = str(Path(__file__).resolve().parents[1] / "recipe.py")


def test_loss_decreases():
    testing.assert_loss_decreases(RECIPE)


def test_overfits_one_batch():
    testing.assert_overfits_batch(RECIPE)


def test_same_seed_same_run():
    testing.assert_deterministic(RECIPE)


def test_checkpoint_round_trip():
    testing.assert_checkpoint_roundtrip(RECIPE)


@pytest.mark.overt(recipe=RECIPE, epochs=3)
def test_a_short_run_reaches_a_sensible_accuracy(overt_train):
    summary = overt_train()
    assert summary["final"]["val/accuracy"] > 0.8
'''

PYPROJECT = '''[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["overt", "scikit-learn"]

[project.optional-dependencies]
test = ["pytest>=7.4"]

[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.overt]
# overt lint and the runtime guards read this table; e.g. ignore = ["scheduler-cadence"]
exclude = ["runs/"]
'''

PRE_COMMIT = '''# pre-commit install   (then every commit is linted by overt)
repos:
  - repo: local
    hooks:
      - id: overt-lint
        name: overt lint
        entry: overt lint
        language: system
        types_or: [python, jupyter]
'''

README = '''# {name}

A PyTorch project trained with overt (`overt --help`): `recipe.py` builds the model,
data, loss and optimizer; `config.yaml` holds the run settings.

    overt train config.yaml            # train: a new runs/recipe-<date>-<time>/ each time
    pytest                             # smoke tests (overt.testing)
    overt lint .                       # the catalog's silent failures, statically
    overt predict runs/recipe-<date>-<time> rows.csv   # use what was trained
'''

GITIGNORE = "runs/\n__pycache__/\n.pytest_cache/\n"

FILES = {
    "recipe.py": RECIPE,
    "config.yaml": CONFIG,
    "tests/test_smoke.py": SMOKE_TEST,
    "pyproject.toml": PYPROJECT,
    ".pre-commit-config.yaml": PRE_COMMIT,
    "README.md": README,
    ".gitignore": GITIGNORE,
}


def create_project(path: str | Path) -> list[Path]:
    """Write a new project into ``path`` (created; must not hold files yet); returns the files written."""
    root = Path(path)
    name = root.resolve().name
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name) or keyword.iskeyword(name):
        raise ConfigError(f"{name!r} is not a usable project name",
                          fix="use letters, digits, - and _, starting with a letter (e.g. my-model)")
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ConfigError(f"{root} already exists and is not an empty folder",
                          why="overt init never overwrites files", fix="choose a new name or an empty folder")
    written = []
    for relative, template in FILES.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(template.format(name=name))
        written.append(target)
    return written
