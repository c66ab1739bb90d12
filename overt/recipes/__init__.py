"""Recipes: small modules that build a model, data, loss and optimizer from a config.

A recipe is any Python module (a built-in name such as ``digits``, a dotted
module path, or a ``.py`` file) that defines::

    defaults = {"lr": 1e-3, "epochs": 5}     # optional: its own parameters + engine defaults

    def build(cfg) -> overt.Recipe: ...      # cfg has every engine setting and parameter

See :mod:`overt.recipes.base` for :class:`~overt.recipes.base.Recipe` and the loader.
"""

from overt.recipes.base import BUILTIN, Recipe, build_recipe, load_recipe_module

__all__ = ["BUILTIN", "Recipe", "build_recipe", "load_recipe_module"]
