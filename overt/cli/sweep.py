"""``overt sweep [RECIPE | CONFIG.yaml] key=a,b other=1,2 [key=value ...]`` (also ``overt train -m ...``)

A small grid search: every combination of the comma-separated values, trained one after the
other into ``SWEEP_DIR/<key=value,...>`` (``SWEEP_DIR``: ``runs_root/<recipe>-sweep-<time>``, a new
folder for every sweep, or ``sweep_dir=...``), then one comparison: ``SWEEP_DIR/sweep.md`` (each
monitor's runs ranked, best first) and ``SWEEP_DIR/report/`` (``overt report`` of every run).

- The whole grid is counted and checked before the first run starts (:mod:`overt.cli.sweep_grid`):
  a misspelt key, a bad value, a value listed twice or an absurd grid costs nothing.
- A run that fails (an overt error, or an exception of the recipe's own code: the line that raised
  it is named, its traceback kept in ``SWEEP_DIR/failed/<run>.txt``) is one failed row: the sweep
  goes on and exits 1.
- SIGTERM or SIGINT stops the whole sweep: the current run stops at a step boundary and saves
  (as ``overt train`` does), no further run starts, and the sweep exits ``128 + N`` saying how to
  continue.  Run again, the same command continues the sweep (the newest unfinished sweep with the
  same plan in ``runs_root``, or ``sweep_dir=``): finished runs are skipped, a stopped or killed
  run resumes from its newest checkpoint (exactly), and a run that failed or has no checkpoint
  starts again (the earlier attempt is moved to ``SWEEP_DIR/.restarted/``).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from overt.cli.sweep_compare import Trial
from overt.cli.sweep_grid import Plan, PlannedRun
from overt.command import add_target_arguments, command, target_and_overrides
from overt.engine.callbacks import Callback

if TYPE_CHECKING:
    from overt.engine.loop import Trainer

HELP = """\
Train every combination of comma-separated override values, one after the other, and compare them.

  overt sweep lr=0.001,0.003,0.01                  the digits recipe at three learning rates
  overt sweep my_recipe.py lr=1e-3,1e-2 hidden=32,64 epochs=5   a 2 x 2 grid, 5 epochs each
  overt train -m lr=1e-3,1e-2                      the same through overt train

A value in brackets stays one value (ignore=[a,b]).  sweep_dir=PATH sets the sweep's folder.
Each run is ranked by its `monitor` (monitor_mode says whether lower is better).  SIGTERM or
Ctrl-C stops the whole sweep (exit 143 or 130); the same command then continues it.
"""

SWEEP_JSON = "sweep.json"
#: where a run's earlier attempt goes when it cannot be continued and starts again
RESTARTED = ".restarted"
#: where the traceback of a run whose recipe code raised is kept
FAILED = "failed"


def timestamp() -> str:
    """The time part of a new sweep folder's name."""
    return time.strftime("%Y%m%d-%H%M%S")


class SweepSignals(Callback):
    """SIGTERM and SIGINT stop the whole sweep.  Installed for the sweep's whole life; during a run
    the run's own checkpoint handler takes the signal (it saves, then stops the run) and hands the
    handlers back after it.  As a callback of every run it stops a run that has no checkpoint
    handler (``checkpoint=false``), and a run about to start when the signal came."""

    def __init__(self) -> None:
        from overt.checkpoint.preempt import PreemptionHandler

        self.handler = PreemptionHandler([signal.SIGTERM, signal.SIGINT], self._on_signal)
        self._trainer: Trainer | None = None

    @property
    def received(self) -> signal.Signals | None:
        return self.handler.received

    def note(self, name: str) -> None:
        """A run stopped on the signal ``name`` (its own handler took it): the sweep stops too."""
        if self.handler.received is None and name in signal.Signals.__members__:
            self.handler.received = signal.Signals[name]
            self.handler._first_at = time.monotonic()

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._trainer is not None:
            self._trainer.should_stop = True

    def on_fit_start(self, trainer: Trainer) -> None:
        self._trainer = trainer
        if self.received is not None:
            trainer.should_stop = True

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._trainer = None

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        self._trainer = None


def _split_sweep_dir(overrides: list[str]) -> tuple[Path | None, list[str]]:
    sweep_dir, rest = None, []
    for item in overrides:
        if item.partition("=")[0].strip() == "sweep_dir":
            sweep_dir = Path(item.partition("=")[2].strip())
        else:
            rest.append(item)
    return sweep_dir, rest


def _saved_plan(folder: Path) -> dict[str, Any] | None:
    from overt.run.reader import read_json

    return read_json(folder / SWEEP_JSON) if folder.is_dir() and not folder.is_symlink() else None


def _try_lock(folder: Path) -> Any:
    """The folder's lock (:class:`overt.run.lock.RunLock`), held; None when another process holds it."""
    from overt.errors import ConfigError
    from overt.run.lock import RunLock

    held = RunLock(folder)
    try:
        held.acquire()
        return held
    except ConfigError:
        return None


def open_sweep(plan: Plan, sweep_dir: Path | None, out: TextIO) -> tuple[Path, bool, Any]:
    """(the sweep's folder; whether it continues an unfinished sweep; its lock, held: the caller
    releases it).
    Without ``sweep_dir``: the newest unfinished sweep of the same plan in ``runs_root`` (that no
    process is running), else a new folder, created exclusively (``-2``, ``-3``... when two sweeps
    start in the same second)."""
    from overt.errors import ConfigError
    from overt.run import lock

    if sweep_dir is not None:
        if sweep_dir.exists() and not sweep_dir.is_dir():
            raise ConfigError(f"sweep_dir={sweep_dir} is an existing file, not a folder",
                              fix="choose another sweep_dir=..., or move the file away")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        held = _try_lock(sweep_dir)
        if held is None:
            info = lock.holder(sweep_dir) or {}
            raise ConfigError(f"the sweep folder {sweep_dir} is in use by another overt process "
                              f"({lock.describe_holder(info)})",
                              fix="wait for that sweep to end (or stop it), or choose another sweep_dir=...")
        saved = _saved_plan(sweep_dir)
        if saved is not None and saved.get("plan") == plan.key:
            return sweep_dir, True, held
        if any(p.name != lock.LOCK for p in sweep_dir.iterdir()):
            held.release()
            if saved is not None and saved.get("grid") == plan.grid_key:
                raise ConfigError(f"the sweep in {sweep_dir} was trained with another version of the recipe "
                                  "(its source changed since)",
                                  why="continuing it would rank runs of two versions of the code against each other",
                                  fix="restore the recipe as it was to continue that sweep, or choose another "
                                      "sweep_dir=... for a new one")
            raise ConfigError(f"the sweep folder {sweep_dir} already exists and holds something else than this sweep",
                              why="a sweep continues only the sweep of the same grid, settings and recipe code",
                              fix="choose another sweep_dir=..., or remove that folder")
        return sweep_dir, False, held
    root = Path(plan.first.runs_root)
    prefix = f"{plan.stem()}-sweep-"
    changed = None  # an unfinished sweep of this grid whose recipe code changed since
    if root.is_dir():
        for folder in sorted((p for p in root.iterdir() if p.name.startswith(prefix)), reverse=True):
            saved = _saved_plan(folder)
            if saved is None or saved.get("state") == "finished":
                continue
            held = _try_lock(folder) if saved.get("plan") == plan.key else None
            if held is not None:
                return folder, True, held
            if saved.get("grid") == plan.grid_key and changed is None:
                changed = folder
    if changed is not None:
        print(f"overt sweep: the unfinished sweep in {changed} has the same grid, but the recipe's source changed "
              "since: this is a new sweep (restore the recipe to continue that one)", file=out, flush=True)
    root.mkdir(parents=True, exist_ok=True)
    base, n = root / f"{prefix}{timestamp()}", 1
    while True:
        folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            n += 1
            continue
        held = _try_lock(folder)
        if held is None:  # another sweep created and locked it first: the next name
            n += 1
            continue
        return folder, False, held


def _run_state(run_dir: Path) -> tuple[str | None, bool]:
    """(the run's status from its own files, whether it has a checkpoint that verifies)."""
    from overt.checkpoint.store import list_checkpoints
    from overt.run.rundir import RunDir, run_status

    if not run_dir.is_dir():
        return None, False
    return run_status(run_dir), any(e.problem is None for e in list_checkpoints(RunDir(run_dir).checkpoints))


def _set_aside(run_dir: Path, sweep_dir: Path) -> Path:
    """Move a run's earlier attempt to ``SWEEP_DIR/.restarted/<folder>-N`` (nothing is deleted)."""
    aside = sweep_dir / RESTARTED
    aside.mkdir(exist_ok=True)
    n = 1
    while (aside / f"{run_dir.name}-{n}").exists():
        n += 1
    target = aside / f"{run_dir.name}-{n}"
    run_dir.rename(target)
    return target


def _train(run: PlannedRun, trial: Trial, sweep_dir: Path, signals: SweepSignals, out: TextIO) -> None:
    """Train (or skip, or continue) one run; its outcome goes into ``trial``."""
    from overt.compose import train_recipe
    from overt.run.reader import read_json
    from overt.run.rundir import RunDir

    status, resumable = _run_state(trial.run_dir)
    if status == "completed":
        trial.summary = read_json(RunDir(trial.run_dir).summary) or {"status": "completed"}
        print(f"overt sweep: {trial.label} already finished: skipped", file=out, flush=True)
        return
    cfg = run.config
    cfg.run_dir, cfg.name = str(trial.run_dir), None
    if resumable and status != "failed":  # stopped, killed, ended abruptly: continued exactly
        _resume(run, trial, signals)
        return
    if trial.run_dir.exists():
        aside = _set_aside(trial.run_dir, sweep_dir)
        print(f"overt sweep: {trial.label}: the earlier attempt ({status or 'unfinished'}) cannot be continued "
              f"(it {'failed' if status == 'failed' else 'has no checkpoint'}): it starts again; the attempt is "
              f"kept in {aside}", file=out, flush=True)
    trial.summary = train_recipe(cfg, run.module, callbacks=[signals])


def _resume(run: PlannedRun, trial: Trial, signals: SweepSignals) -> None:
    from overt.checkpoint.callback import find_checkpoint
    from overt.compose import train_recipe
    from overt.recipes.base import check_recipe_source
    from overt.run.rundir import RunDir

    with RunDir(trial.run_dir).lock():  # as `overt resume` holds it
        restored = find_checkpoint(trial.run_dir)
        recorded = restored.meta.get("recipe_source")
        check_recipe_source(recorded if isinstance(recorded, dict) else None, str(run.config.recipe))
        trial.summary = train_recipe(run.config, run.module, resume=restored, callbacks=[signals])


def _failed(trial: Trial, error: Exception, sweep_dir: Path, out: TextIO) -> None:
    """Record a run's failure: one line here; for an exception that is not overt's own (the recipe's
    code failed) also where it was raised, and its whole traceback in ``SWEEP_DIR/failed/<run>.txt``."""
    from overt.errors import OvertError
    from overt.run.atomic import write_text_atomic

    first = str(error).splitlines()[0] if str(error) else ""
    trial.error = f"{type(error).__name__}: {first}"
    where = ""
    if not isinstance(error, OvertError):
        frames = traceback.extract_tb(error.__traceback__)
        if frames:
            where = f" (raised at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name}"
        try:
            (sweep_dir / FAILED).mkdir(exist_ok=True)
            log = sweep_dir / FAILED / f"{trial.run_dir.name}.txt"
            write_text_atomic(log, "".join(traceback.format_exception(type(error), error, error.__traceback__)))
            where += f"; traceback: {log})" if where else f" (traceback: {log})"
        except OSError:
            where += ")" if where else ""
    print(f"overt sweep: {trial.label} failed: {trial.error}{where}; the sweep goes on", file=out, flush=True)


def run_sweep(target: str | None, overrides: list[str], out: TextIO | None = None,
              shown: str = "overt sweep") -> tuple[Path, list[Trial], signal.Signals | None]:
    """Check the whole grid, train (or continue) its runs one by one, write the comparison.
    Returns (the sweep's folder, every run's outcome, the signal that stopped the sweep or None).
    Progress goes to ``out`` (default: stderr)."""
    from overt.cli import sweep_compare
    from overt.cli.sweep_grid import plan as check_grid

    out = out if out is not None else sys.stderr
    sweep_arg, rest = _split_sweep_dir(overrides)
    plan = check_grid(target, rest)
    sweep_dir, continuing, held = open_sweep(plan, sweep_arg, out)
    try:
        trials = [Trial(dict(r.overrides), sweep_dir / r.folder, str(r.config.monitor), str(r.config.monitor_mode))
                  for r in plan.runs]
        if continuing:
            print(f"overt sweep: continuing the unfinished sweep in {sweep_dir} (sweep_dir=ANOTHER_PATH starts "
                  "a new one)", file=out, flush=True)
        signals = SweepSignals()
        signals.handler.install()
        try:
            sweep_compare.write(sweep_dir, trials, "running", (plan.key, plan.grid_key), shown)
            for i, (run, trial) in enumerate(zip(plan.runs, trials), 1):
                if signals.received is not None:
                    break
                print(f"overt sweep [{i}/{len(plan.runs)}] {trial.label} -> {trial.run_dir}", file=out, flush=True)
                t0 = time.perf_counter()
                try:
                    _train(run, trial, sweep_dir, signals, out)
                except Exception as error:  # one failed run is one failed row: the sweep goes on
                    _failed(trial, error, sweep_dir, out)
                trial.seconds = time.perf_counter() - t0
                preempted = (trial.summary or {}).get("preempted")
                if isinstance(preempted, dict):
                    signals.note(str(preempted.get("signal")))
                sweep_compare.write(sweep_dir, trials, "running", (plan.key, plan.grid_key), shown)
            state = "stopped" if signals.received is not None else "finished"
            sweep_compare.write(sweep_dir, trials, state, (plan.key, plan.grid_key), shown)
            ran = [t.run_dir for t in trials if t.run_dir.is_dir()]
            if ran:
                from overt.report import write_report

                write_report(ran, sweep_dir / "report")
        finally:
            signals.handler.uninstall()
    finally:
        held.release()
    return sweep_dir, trials, signals.received


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="overt sweep", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(parser, "key=value or key=a,b,c (swept) overrides")
    args = parser.parse_args(argv)
    args.target, args.overrides = target_and_overrides(args.target, args.overrides)
    return args


def sweep_command(argv: list[str], shown: list[str]) -> int:
    """Run the sweep ``argv`` names; ``shown`` is the command line as the user typed it (said when
    the sweep stops, to continue it)."""
    from overt.checkpoint.preempt import exit_code
    from overt.errors import ConfigError

    args = parse_args(argv)
    if any(o.replace(" ", "").startswith("nproc=") for o in args.overrides):
        raise ConfigError("nproc= is not supported in a sweep (runs are sequential, one process each); "
                          "run `overt train ... nproc=N` per configuration")
    command_line = shlex.join(shown)
    sweep_dir, trials, stopped = run_sweep(args.target, args.overrides, shown=command_line)
    print((sweep_dir / "sweep.md").read_text(), end="")
    done = sum(t.status == "completed" for t in trials)
    failed = sum(t.status == "failed" for t in trials)
    if stopped is not None:
        where = ""
        for t in trials:
            if t.status == "stopped":
                s = t.summary or {}
                saved = (s.get("checkpoint") or {}).get("last") if isinstance(s.get("checkpoint"), dict) else None
                where = (f"; {t.label} stopped at step {s.get('steps')}, "
                         + ("saved: it resumes from there" if saved else "without a checkpoint: it starts again"))
        print(f"overt sweep: stopped on {stopped.name}: {done} of {len(trials)} run(s) finished{where}. "
              f"To continue the sweep, run the same command again (finished runs are skipped): {command_line}  "
              f"[folder {sweep_dir}]", file=sys.stderr, flush=True)
        return exit_code(stopped)
    print(f"overt sweep: {len(trials)} run(s) in {sweep_dir}"
          f"{f', {failed} of {len(trials)} run(s) failed' if failed else ''}; comparison {sweep_dir / 'sweep.md'}",
          file=sys.stderr, flush=True)
    return 1 if failed else 0


@command("overt sweep")
def main(argv: list[str]) -> int:
    return sweep_command(argv, ["overt", "sweep", *argv])
