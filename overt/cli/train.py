"""``overt train [RECIPE | CONFIG.yaml] [key=value ...]``"""

from __future__ import annotations

import argparse
from typing import Any

from overt.command import add_target_arguments, command, target_and_overrides
from overt.errors import OvertError
from overt.torchrun import Topology

HELP = """\
Train a recipe.

  overt train                         the built-in digits recipe
  overt train my_recipe.py lr=0.01    a recipe file, with overrides
  overt train config.yaml epochs=3    a config file naming its recipe
  overt train --list-keys             every config key with its default
  overt train -m lr=1e-3,1e-2         a sweep: each value trained, then compared (overt sweep)
  overt train my_recipe.py nproc=4    4 processes (DDP; strategy=fsdp for FSDP2), torchrun's
                                      agent in this process; see docs/distributed.md

Overrides are key=value (values read as YAML: 0.01, true, [a, b]).
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="overt train", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(parser)
    parser.add_argument("--list-keys", action="store_true", help="print every config key and its default, then exit")
    parser.add_argument("-m", "--multirun", action="store_true",
                        help="sweep: key=a,b trains every combination (as `overt sweep`)")
    args = parser.parse_args(argv)
    args.target, args.overrides = target_and_overrides(args.target, args.overrides)
    return args


def resolve_run_config(target: str | None, overrides: list[str],
                       modules: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """(recipe module, validated config) from the command line's target and ``key=value`` overrides
    (``modules``: see :func:`overt.recipes.base.recipe_config`)."""
    from overt.config import parse_overrides
    from overt.recipes.base import recipe_config

    return recipe_config(target, parse_overrides(overrides), modules)


def exit_status(summary: dict[str, Any]) -> int:
    """0 for a finished run; 128 + signal number after a clean stop on a preemption signal."""
    return int((summary.get("preempted") or {}).get("exit_code", 0))


def launched(argv: list[str], overrides: list[str]) -> int | None:
    """``nproc=N`` (N > 1) outside torchrun: run this same command on N workers under torchrun's
    elastic agent (in this process) and return the job's exit status; else ``None``."""

    from overt.distributed.launch import launch, split_launch_overrides

    nproc, _ = split_launch_overrides(overrides)
    if nproc is None or nproc < 2 or Topology.of_process().under_torchrun:
        return None
    return launch(nproc, [a for a in argv if not a.replace(" ", "").startswith("nproc=")])


def as_worker() -> None:
    """A process that exits when its run ends (``overt train``/``overt resume``): once the run has
    stopped cleanly or completed, no further signal turns its exit (``128 + N``, or 0 after the final
    files are written) into a death by signal (torchrun's agent sends SIGTERM to the workers still
    running when the first one exits; a preemption can land after the last step).  In a worker
    started by torchrun (``WORLD_SIZE`` > 1) also: die with the agent (a SIGKILLed launcher leaves no
    worker behind).  See overt/checkpoint/preempt.py."""
    from overt.checkpoint.preempt import ignore_after_stop

    ignore_after_stop()
    if not Topology.of_process().distributed:
        return
    from overt.distributed.launch import die_with_agent

    die_with_agent()


def run_distributed(cfg: Any, job: Any) -> Any:
    """``job()`` inside the torchrun process group (when there is one), torn down however it ends."""
    from overt.distributed.group import process_group

    with process_group(cfg.device):
        return job()


def job_failure(exc: Exception) -> OvertError | int | None:
    """What ``overt train`` and ``overt resume`` make of an exception that is not overt's own
    (:func:`overt.command.command`'s ``translate``; overt's own errors are one line and exit 2
    there): a full disk is overt's disk-full error (exit 2); a rank whose peer died exits 1 (it
    said so itself, and the launcher names the rank that died); anything else is a bug and
    keeps its traceback."""
    from overt.distributed.launch import peer_gone
    from overt.errors import DiskFullError
    from overt.run.atomic import is_disk_full

    if peer_gone(exc):
        return 1
    if is_disk_full(exc):
        return DiskFullError(f"a file of the run ({type(exc).__name__}: {exc})")
    return None


@command("overt train", translate=job_failure)
def main(argv: list[str]) -> int:
    as_worker()
    args = parse_args(argv)
    if args.multirun:
        from overt.cli import sweep

        target = [args.target] if args.target else []
        return sweep.sweep_command([*target, *args.overrides], ["overt", "train", *argv])
    code = launched(["train", *argv], args.overrides)
    if code is not None:
        return code
    from overt.distributed.launch import split_launch_overrides

    module, cfg = resolve_run_config(args.target, split_launch_overrides(args.overrides)[1])
    if args.list_keys:
        for key, field in type(cfg).model_fields.items():
            print(f"{key} = {getattr(cfg, key)!r}    # {field.description or 'recipe parameter'}")
        return 0
    from overt.compose import train_recipe

    summary = run_distributed(cfg, lambda: train_recipe(cfg, module))
    return exit_status(summary)
