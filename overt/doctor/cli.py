"""``overt doctor [RECIPE | CONFIG.yaml | NAME] [key=value ...] [--lr-find] [--bench] [--strict]``"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from overt.command import add_target_arguments, command, target_and_overrides

HELP = """\
Run readiness probes on a recipe and write the readiness note.

  overt doctor                          the built-in digits recipe
  overt doctor my_recipe.py lr=0.01     a recipe file, with overrides
  overt doctor config.yaml --strict     a config file; warnings fail too
  overt doctor --lr-find --bench        also the learning-rate range test and the device benchmark
  overt doctor out=reports/doctor       where to write (default: runs/doctor/<recipe>-<time>/)
  overt doctor project.py:make          a Lightning or Hugging Face project: make() returns
                                        (LightningModule, LightningDataModule), a transformers
                                        Trainer, or {model, train_dataset, eval_dataset, args};
                                        loss_kind=cross_entropy gives the initial loss its ln(C)

Writes readiness.md, readiness.json and PNG plots (with matplotlib).  Exit code: 0 when no
probe fails, 1 when one does (or warns, with --strict), 2 on usage errors.
Doctor settings are key=value too: overfit_steps, overfit_samples, overfit_time_s,
resume_steps, determinism_steps, parity_steps, throughput_steps, throughput_time_s, lr_find_steps.
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    from overt.doctor.api import ORDER

    parser = argparse.ArgumentParser(prog="overt doctor", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(parser, "key=value config overrides and doctor settings")
    parser.add_argument("--lr-find", action="store_true", help="also run the learning-rate range test")
    parser.add_argument("--bench", action="store_true", help="also benchmark the CPU and the accelerator")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument("--only", default=None, metavar="PROBES",
                        help=f"comma-separated probes to run, of: {', '.join(ORDER)}")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_intermixed_args(argv)
    args.target, args.overrides = target_and_overrides(args.target, args.overrides)
    return args


@command("overt doctor")
def main(argv: list[str]) -> int:
    args = parse_args(argv)
    readiness, directory = run(args)
    strict = args.strict
    counts = ", ".join(f"{n} {v}" for v, n in _counts(readiness).items() if n)
    print(f"overt doctor: {readiness.verdict.upper()} ({counts}); note: {directory / 'readiness.md'}",
          file=sys.stderr)
    return readiness.exit_code(strict=strict)


def _counts(readiness: Any) -> dict[str, int]:
    from overt.doctor.result import Verdict

    return {v.value: readiness.count(v) for v in Verdict}


def run(args: argparse.Namespace) -> tuple[Any, Path]:
    """Resolve the recipe and settings, build it, run the probes, write the note."""
    if args.target and ":" in args.target and not args.target.endswith((".yaml", ".yml")):
        from overt.doctor.frameworks import run_project  # FILE.py:FUNCTION -> a Lightning or HF project

        return run_project(args)
    from overt.config import parse_overrides
    from overt.doctor.api import DOCTOR_KEYS, check_out, doctor, out_dir
    from overt.doctor.build import build_failure
    from overt.doctor.readiness import Readiness
    from overt.engine.seeding import seed_everything
    from overt.errors import RecipeError
    from overt.recipes.base import build_recipe, recipe_config

    values = parse_overrides(args.overrides)  # also rejects items that are not key=value
    out = values.pop("out", None)
    own = {k: v for k, v in values.items() if k in DOCTOR_KEYS}
    module, cfg = recipe_config(args.target, {k: v for k, v in values.items() if k not in own})
    only = [p.strip() for p in args.only.split(",")] if args.only else None  # checked by doctor()
    directory = out_dir(out, cfg)
    name = Path(cfg.recipe).stem if cfg.recipe.endswith(".py") else cfg.recipe
    seed_everything(cfg.seed)
    try:
        recipe = build_recipe(module, cfg)
    except RecipeError as exc:
        if exc.__cause__ is None:
            raise  # no build function, or it returned something else: a usage error
        result = build_failure(exc.__cause__, f"{name}: build(cfg)")
        readiness = Readiness([result], {"name": name})
        if not args.quiet:
            print(f"doctor [ 1/1] {result.title:<38} FAIL    {result.summary}", file=sys.stderr)
        readiness.write(check_out(directory))
        return readiness, directory

    def rebuild() -> tuple[Any, Any]:
        fresh = build_recipe(module, cfg)
        return fresh.model, fresh.optimizer

    readiness = doctor(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                       scheduler=recipe.scheduler, scheduler_interval=recipe.scheduler_interval,
                       forward=recipe.forward, collate_fn=recipe.collate_fn, build=rebuild, config=cfg, name=name,
                       progress=not args.quiet, only=only, out=directory,
                       lr_find=own.pop("lr_find", False) or args.lr_find, bench=own.pop("bench", False) or args.bench,
                       **own)  # doctor() checks every setting, --only and out= once
    return readiness, directory
