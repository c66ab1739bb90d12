"""``overt train [RECIPE | CONFIG.yaml] [key=value ...]``"""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = """\
Train a recipe.

  overt train                         the built-in digits recipe
  overt train my_recipe.py lr=0.01    a recipe file, with overrides
  overt train config.yaml epochs=3    a config file naming its recipe
  overt train --list-keys             every config key with its default

Overrides are key=value (values read as YAML: 0.01, true, [a, b]).
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="overt train", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", nargs="?", default=None,
                        help="built-in recipe name, recipe .py file, module path, or .yaml config")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    parser.add_argument("--list-keys", action="store_true", help="print every config key and its default, then exit")
    args = parser.parse_args(argv)
    if args.target is not None and "=" in args.target:  # `overt train epochs=3`: no target, only overrides
        args.overrides.insert(0, args.target)
        args.target = None
    return args


def resolve_run_config(target: str | None, overrides: list[str]) -> tuple[Any, Any]:
    """(recipe module, validated config) from the command line's target and overrides."""
    from overt.config import load_config_file, parse_overrides, resolve
    from overt.recipes.base import load_recipe_module, recipe_defaults

    values: dict[str, Any] = {}
    source = "command line"
    if target is not None and target.endswith((".yaml", ".yml")):
        values.update(load_config_file(target))
        source = f"{target} or command line"
    elif target is not None:
        values["recipe"] = target
    values.update(parse_overrides(overrides))
    recipe = str(values.get("recipe", "digits"))
    module = load_recipe_module(recipe)
    defaults = recipe_defaults(module)
    return module, resolve(defaults, {**defaults, **values}, source=source)


def run(cfg: Any, module: Any, resume: Any = None) -> dict[str, Any]:
    """Build the recipe, claim the run directory, train.  With ``resume`` (a checkpoint read by
    :func:`overt.checkpoint.find_checkpoint`) the run directory is reused and training continues
    from the checkpoint."""
    from overt.engine.loop import Trainer
    from overt.engine.seeding import seed_everything
    from overt.recipes.base import build_recipe
    from overt.run import lock
    from overt.run.rundir import check_claimable, claim, run_dir_for

    run_dir = run_dir_for(cfg.run_dir, cfg.runs_root, cfg.name, cfg.recipe)
    named = bool(cfg.run_dir or cfg.name)  # else a generated name, made unique when claimed
    if resume is None and named:
        check_claimable(run_dir)  # before any data is loaded
    seed_everything(cfg.seed)  # model initialisation inside build() is seeded too
    recipe = build_recipe(module, cfg)  # a recipe that fails to build leaves no run directory behind
    if resume is None:
        run_dir = claim(run_dir, unique=not named)
    try:
        try:
            trainer = Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                              scheduler=recipe.scheduler, scheduler_interval=recipe.scheduler_interval,
                              metrics=recipe.metrics, forward=recipe.forward, collate_fn=recipe.collate_fn,
                              config=cfg, run_dir=run_dir)
            if resume is not None:
                from overt.checkpoint import restore_trainer

                restore_trainer(trainer, resume)
        except Exception as error:  # the run directory exists: it says why the run never started
            from overt.run.writer import failed_status, write_status

            write_status(run_dir, failed_status(error, step=None))
            raise
        return trainer.fit()  # from here on the RunWriter records the status
    finally:
        if resume is None:
            lock.release(run_dir)


def exit_status(summary: dict[str, Any]) -> int:
    """0 for a finished run; 128 + signal number after a clean stop on a preemption signal."""
    return int((summary.get("preempted") or {}).get("exit_code", 0))


def main(argv: list[str]) -> int:
    from overt.errors import OvertError

    args = parse_args(argv)
    try:
        module, cfg = resolve_run_config(args.target, args.overrides)
        if args.list_keys:
            for key, field in type(cfg).model_fields.items():
                print(f"{key} = {getattr(cfg, key)!r}    # {field.description or 'recipe parameter'}")
            return 0
        summary = run(cfg, module)
    except OvertError as exc:
        print(f"overt train: error: {exc}", file=sys.stderr)
        return 2
    return exit_status(summary)
