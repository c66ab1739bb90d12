"""``overt resume RUN_DIR [key=value ...]``: continue a run from its newest valid checkpoint."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from overt.cli.train import job_failure
from overt.command import command
from overt.torchrun import Topology

HELP = """\
Continue a run from its newest valid checkpoint (a bad newest one is named and skipped).
A finished run (every epoch done, or stopped early) is left as it is.

  overt resume runs/digits-20260101-120000
  overt resume runs/mine epochs=30          continue with changed settings (reported)
  overt resume runs/ddp nproc=4             another number of processes (default: as many as saved it)

The run is rebuilt from the config saved in the checkpoint.  Its recipe is code: overt
says which file it imports and refuses one whose source changed since the run was trained
(--allow-changed-recipe resumes with the new code anyway), and a recipe file this machine
never trained with, or a checkpoint that records no hash of it (--trust-recipe: you vouch).  Exit status: 0 when the
run finishes, 128 + N when it stops cleanly on signal N again (143 for SIGTERM),
2 on an error (nothing to resume, unreadable checkpoints, bad overrides).
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="overt resume", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="the run directory (holds checkpoints/), or one checkpoint folder")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    parser.add_argument("--allow-changed-recipe", action="store_true",
                        help="resume even though the recipe's source differs from the one the run was trained with")
    parser.add_argument("--trust-recipe", action="store_true",
                        help="import the recipe file the checkpoint names even though this machine did not train "
                             "with it (or the checkpoint records no hash of it)")
    return parser.parse_args(argv)


def resume_config(restored: Any, run_dir: Path, overrides: list[str],
                  allow_changed_recipe: bool = False, trust_recipe: bool = False) -> tuple[Any, Any]:
    """(recipe module, validated config): the checkpoint's config, the overrides, this run directory.
    The recipe is imported only after its source was checked against the one the run was trained with,
    and (when it is not built in) against this machine's record of what ``overt train`` ran here
    (:mod:`overt.recipes.trust`), unless the user consents (``trust_recipe``, ``allow_changed_recipe``)."""
    from overt.checkpoint.codec import CheckpointError
    from overt.config import parse_overrides, resolve
    from overt.recipes.base import BUILTIN, check_recipe_source, load_recipe_module, recipe_defaults
    from overt.recipes.trust import authorize

    saved = dict(restored.meta.get("config") or {})
    if not saved:
        raise CheckpointError(f"{restored.path} holds no run config",
                              why="`overt resume` rebuilds the run from the config saved in the checkpoint",
                              fix="resume it from Python: build the Trainer, then "
                                  "overt.checkpoint.resume(trainer, path)")
    values = {**saved, **parse_overrides(overrides), "run_dir": str(run_dir)}
    spec = str(values.get("recipe", "digits"))
    recorded = restored.meta.get("recipe_source")
    if spec in BUILTIN or allow_changed_recipe:  # overt's own code, or the user said to run the file as it is now
        lines = check_recipe_source(recorded, spec, allow_changed=allow_changed_recipe)
    else:  # a file named by a checkpoint: only the code this machine trained with, or with consent
        if isinstance(recorded, dict) and recorded.get("sha256") and not trust_recipe:
            check_recipe_source(recorded, spec)  # a changed source: refused, naming --allow-changed-recipe
        lines = authorize(spec, recorded=recorded if isinstance(recorded, dict) else {}, trust=trust_recipe,
                          command="overt resume", run=str(run_dir))
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    _note_versions(restored.versions)
    module = load_recipe_module(spec)
    defaults = recipe_defaults(module)
    return module, resolve(defaults, {**defaults, **values}, source=f"{restored.path.name} or command line")


def _note_versions(saved: dict[str, str]) -> None:
    """Say when torch or overt differ from the checkpoint's: exact resume holds on the same versions."""
    from overt.checkpoint.checkpointer import versions

    now = versions()
    changed = [f"{k} {saved[k]} -> {now[k]}" for k in ("torch", "overt") if saved.get(k) and saved[k] != now.get(k)]
    if changed:
        print(f"overt: the checkpoint was written with other versions ({', '.join(changed)}): training goes on, "
              "but not necessarily bit-identically to an uninterrupted run", file=sys.stderr, flush=True)


def finished(restored: Any, run_dir: Path, overrides: list[str]) -> str | None:
    """Why the run is finished and complete on disk (its checkpoint ends the run, no newer checkpoint
    was skipped as unusable, and its final weights and summary are there), or ``None``: then
    ``overt resume`` trains what is left, or, when nothing is, writes the final files again from
    the checkpoint (and moves the unusable ones aside)."""
    from overt.checkpoint.finished import finished_because
    from overt.config import parse_overrides
    from overt.run.reader import read_json
    from overt.run.rundir import RunDir

    run = RunDir(run_dir)
    why = finished_because(restored, parse_overrides(overrides))
    if why is None or restored.skipped or not run.weights.is_file():
        return None
    summary = read_json(run.summary) or {}  # (a run stopped by a signal at its very end says "stopped")
    return why if summary.get("status") == "completed" else None


def saved_world_size(path: Path) -> int | None:
    """How many processes saved the newest checkpoint of ``path`` (a run directory or a checkpoint
    folder), read from its ``state.json`` alone; None when it cannot be told (the workers then
    verify and choose the checkpoint themselves)."""
    import json

    from overt.checkpoint.store import STATE_JSON, list_checkpoints, read_regular

    from overt.run.rundir import RunDir

    path = Path(path)
    if RunDir.of(path).path != path:  # a checkpoint folder
        newest = path
    else:
        root = RunDir(path).checkpoint_root()
        entries = [e for e in list_checkpoints(root) if e.problem is None]
        if not entries:
            return None
        newest = entries[-1].path
    try:
        state = json.loads(read_regular(newest / STATE_JSON, 1 << 26))
        world = state["meta"]["world_size"]
    except Exception:  # unreadable or not written by overt: the workers say what is wrong
        return None
    return world if isinstance(world, int) and not isinstance(world, bool) and 1 <= world <= 4096 else None


def _with_saved_world_size(argv: list[str], args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Without ``nproc=``, resume with as many processes as saved the checkpoint (outside torchrun)."""
    import sys

    from overt.distributed.launch import split_launch_overrides

    nproc, _ = split_launch_overrides(args.overrides)
    if nproc is not None or Topology.of_process().under_torchrun:
        return argv, args.overrides
    world = saved_world_size(Path(args.run_dir))
    if world is None or world == 1:
        return argv, args.overrides
    print(f"overt resume: the checkpoint was saved by {world} processes: resuming with nproc={world} "
          f"(give nproc=N to resume with another number)", file=sys.stderr, flush=True)
    return [*argv, f"nproc={world}"], [*args.overrides, f"nproc={world}"]


@command("overt resume", translate=job_failure)
def main(argv: list[str]) -> int:
    from overt.cli.train import as_worker, exit_status, launched

    as_worker()
    args = parse_args(argv)
    from overt.run.rundir import RunDir

    argv, args.overrides = _with_saved_world_size(argv, args)
    code = launched(["resume", *argv], args.overrides)  # nproc=N: N workers under torchrun's agent
    if code is not None:
        return code
    path = Path(args.run_dir)
    run = RunDir.of(path)
    run_dir = run.path
    main = Topology.of_process().is_main  # under torchrun rank 0 holds the lock and speaks
    # first (before torch is imported): another process may be training it.  A folder without checkpoints
    # has nothing to resume (said below) and gets no lock file: overt marks only folders that hold runs
    with run.lock() if run.checkpoints.is_dir() and main else contextlib.nullcontext():
        from overt.checkpoint.callback import find_checkpoint
        from overt.cli.train import run_distributed
        from overt.compose import train_recipe
        from overt.distributed.launch import split_launch_overrides

        restored = find_checkpoint(path) if main else find_checkpoint(path, log=lambda message: None)
        done = finished(restored, run_dir, split_launch_overrides(args.overrides)[1])
        if done is not None:
            if main:
                print(f"overt resume: {run_dir} is finished ({done}); nothing to resume, nothing was changed: "
                      f"its final weights are {run.weights}", file=sys.stderr, flush=True)
            return 0
        module, cfg = resume_config(restored, run_dir, split_launch_overrides(args.overrides)[1],
                                    args.allow_changed_recipe, args.trust_recipe)
        summary = run_distributed(cfg, lambda: train_recipe(cfg, module, resume=restored))
    return exit_status(summary)
