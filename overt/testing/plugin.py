"""overt's pytest plugin, registered through the ``pytest11`` entry point when overt is installed
(or loaded with ``-p overt.testing.plugin``).

- marker ``@pytest.mark.overt(recipe="recipe.py", **settings)``: the recipe (and config overrides)
  the fixtures below use; on a class or module it applies to every test inside.
- fixture ``overt_recipe``: the marker's recipe, built (a :class:`overt.testing.Subject`), ready for
  the ``overt.testing.assert_*`` helpers.
- fixture ``overt_train``: ``overt_train(**more_settings) -> summary``: trains the marker's recipe
  into a temporary run directory (no progress, no checkpoints, no TensorBoard); the run
  directory is ``summary["run_dir"]``.
- fixture ``overt_shared_data``: ``overt_shared_data("mnist-t10k") -> Path`` under
  ``../shared/data`` (next to the project's root), or the test is skipped saying what is absent.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Callable

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "overt(recipe, **settings): the recipe and config overrides for the overt_recipe and "
                   "overt_train fixtures")


def _marker(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
    marker = request.node.get_closest_marker("overt")
    if marker is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses an overt fixture without @pytest.mark.overt(recipe=...)")
    kwargs = dict(marker.kwargs)
    recipe = marker.args[0] if marker.args else kwargs.pop("recipe", None)
    if recipe is None:
        raise pytest.UsageError(f"{request.node.nodeid}: @pytest.mark.overt needs a recipe")
    return recipe, kwargs


@pytest.fixture
def overt_recipe(request: pytest.FixtureRequest) -> Any:
    """The marked recipe, built, as an :class:`overt.testing.Subject`."""
    from overt.testing.subject import subject

    recipe, settings = _marker(request)
    return subject(recipe, **settings)


@pytest.fixture
def overt_train(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """``overt_train(**more_settings) -> summary`` for the marked recipe, in a temporary run directory."""
    recipe, settings = _marker(request)
    counter = itertools.count()

    def train_run(**more: Any) -> dict[str, Any]:
        from overt.compose import train_recipe
        from overt.config import resolve
        from overt.recipes.base import load_recipe_module, recipe_defaults

        module = load_recipe_module(str(recipe))
        defaults = recipe_defaults(module)
        values = {**defaults, "recipe": str(recipe), "progress": "off", "checkpoint": False, "tensorboard": False,
                  "run_dir": str(tmp_path / f"run-{next(counter)}"), **settings, **more}
        return train_recipe(resolve(defaults, values, source="@pytest.mark.overt"), module)

    return train_run


@pytest.fixture
def overt_shared_data(request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """``overt_shared_data(relative) -> Path`` in ``../shared/data``, or skip the test naming what is absent."""
    root = Path(request.config.rootpath).parent / "shared" / "data"

    def find(relative: str = "") -> Path:
        path = root / relative
        if not path.exists():
            pytest.skip(f"{path} is not present (real data sets live in ../shared/data; see its README)")
        return path

    return find
