"""``overt sweep [RECIPE | CONFIG.yaml] key=a,b other=1,2 [key=value ...]`` (also ``overt train -m ...``)

A small grid search: every combination of the comma-separated values, trained one after the
other into ``SWEEP_DIR/<key=value,...>`` (``SWEEP_DIR``: ``runs_root/<recipe>-sweep-<time>``, or
``sweep_dir=...``), then one comparison: ``SWEEP_DIR/sweep.md`` (a table of the runs by
``monitor``, best first) and ``SWEEP_DIR/report/`` (``overt report`` of every run: the
differing config keys, curves side by side).  Every combination's config is checked before
the first run starts, so a misspelt key or a bad value costs nothing.  A run that fails is
recorded as failed and the sweep goes on; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overt.command import add_target_arguments, command, target_and_overrides

HELP = """\
Train every combination of comma-separated override values, one after the other, and compare them.

  overt sweep lr=0.001,0.003,0.01                  the digits recipe at three learning rates
  overt sweep my_recipe.py lr=1e-3,1e-2 hidden=32,64 epochs=5   a 2 x 2 grid, 5 epochs each
  overt train -m lr=1e-3,1e-2                      the same through overt train

A value in brackets stays one value (ignore=[a,b]).  sweep_dir=PATH sets the sweep's folder.
The runs are ranked by the recipe's `monitor` (monitor_mode says whether lower is better).
"""


@dataclass
class Trial:
    """One combination: its overrides, run directory and outcome."""

    overrides: dict[str, str]
    run_dir: Path
    summary: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.overrides.items()) or "defaults"


def split_values(raw: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``; a bracketed or quoted value stays whole."""
    text = raw.strip()
    if text[:1] in "[{'\"" or "," not in text:
        return [text]
    return [v.strip() for v in text.split(",") if v.strip()]


def grid(overrides: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """(fixed overrides, one dict of swept key -> value per combination, in grid order)."""
    from overt.errors import ConfigError

    fixed: list[str] = []
    axes: dict[str, list[str]] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"cannot read the override {item!r}", why="overrides are key=value pairs",
                              fix="write it as key=value, or key=a,b,c to sweep over a, b and c")
        values = split_values(raw)
        if len(values) > 1:
            if key.strip() in axes:
                raise ConfigError(f"{key.strip()} is swept twice", fix="give each key's values once: key=a,b,c")
            axes[key.strip()] = values
        else:
            fixed.append(f"{key.strip()}={raw}")
    combos = [dict(zip(axes, values)) for values in itertools.product(*axes.values())] if axes else [{}]
    return fixed, combos


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "=,.-_" else "_" for c in label)[:120]


def rank(trials: list[Trial], monitor: str, mode: str) -> list[Trial]:
    """Trials with a best value first (best to worst), then the failed ones."""
    def value(t: Trial) -> float | None:
        best = ((t.summary or {}).get("best") or {}).get("value")
        return best if isinstance(best, (int, float)) else None

    scored = [t for t in trials if value(t) is not None]
    scored.sort(key=lambda t: value(t), reverse=(mode == "max"))  # type: ignore[arg-type,return-value]
    return scored + [t for t in trials if value(t) is None]


def comparison(trials: list[Trial], monitor: str, mode: str) -> str:
    """``sweep.md``: the runs ranked by ``monitor``."""
    from overt.report.markdown import table

    rows = []
    for i, t in enumerate(rank(trials, monitor, mode), 1):
        s = t.summary or {}
        best = s.get("best") or {}
        rows.append([i, t.label, "failed: " + t.error if t.error else s.get("status", "?"), best.get("value"),
                     best.get("step"), s.get("epochs"), round(t.seconds, 1), t.run_dir.name])
    head = [f"# Sweep: {len(trials)} run(s), ranked by {monitor} ({'lower' if mode == 'min' else 'higher'} is better)",
            "", table(["rank", "overrides", "status", f"best {monitor}", "at step", "epochs", "seconds", "run"], rows),
            "", "Curves and the config keys that differ: [report/report.md](report/report.md)."]
    return "\n".join(head) + "\n"


def run_sweep(target: str | None, overrides: list[str], out=sys.stderr) -> tuple[Path, list[Trial]]:
    """Check every combination's config, train them one by one, write the comparison."""
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe
    from overt.errors import ConfigError, OvertError

    sweep_dir = None
    rest = []
    for item in overrides:
        if item.startswith("sweep_dir="):
            sweep_dir = Path(item.partition("=")[2])
        else:
            rest.append(item)
    fixed, combos = grid(rest)
    if any(k in ("run_dir", "name") for c in combos for k in c):
        raise ConfigError("run_dir and name cannot be swept", fix="each run's folder is SWEEP_DIR/<its overrides>")
    # every configuration is checked before the first run: a typo fails now, not after hours
    planned = [(combo, *resolve_run_config(target, [*fixed, *[f"{k}={v}" for k, v in combo.items()]]))
               for combo in combos]
    first_cfg = planned[0][2]
    if sweep_dir is None:
        stem = Path(first_cfg.recipe).stem if first_cfg.recipe.endswith((".py", ".yaml", ".yml")) \
            else first_cfg.recipe.rsplit(".", 1)[-1]
        sweep_dir = Path(first_cfg.runs_root) / f"{stem}-sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    if sweep_dir.exists() and any(sweep_dir.iterdir()):
        raise ConfigError(f"the sweep folder {sweep_dir} already exists and is not empty",
                          fix="choose another sweep_dir=..., or remove that folder")
    trials = []
    for i, (combo, module, cfg) in enumerate(planned, 1):
        folder = _safe(",".join(f"{k}={v}" for k, v in combo.items())) or "defaults"
        trial = Trial(dict(combo), sweep_dir / folder)
        cfg.run_dir, cfg.name = str(trial.run_dir), None
        print(f"overt sweep [{i}/{len(planned)}] {trial.label} -> {trial.run_dir}", file=out, flush=True)
        t0 = time.perf_counter()
        try:
            trial.summary = train_recipe(cfg, module)
        except (OvertError, RuntimeError, ValueError) as exc:  # one failed run does not end the sweep
            trial.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            print(f"overt sweep: {trial.label} failed: {trial.error}", file=out, flush=True)
        trial.seconds = time.perf_counter() - t0
        trials.append(trial)
    monitor, mode = first_cfg.monitor, first_cfg.monitor_mode
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "sweep.md").write_text(comparison(trials, monitor, mode))
    (sweep_dir / "sweep.json").write_text(json.dumps({
        "monitor": monitor, "mode": mode,
        "runs": [{"overrides": t.overrides, "run_dir": str(t.run_dir), "error": t.error, "seconds": round(t.seconds, 3),
                  "status": (t.summary or {}).get("status"), "best": (t.summary or {}).get("best")}
                 for t in rank(trials, monitor, mode)]}, indent=2) + "\n")
    ran = [t.run_dir for t in trials if t.run_dir.exists()]
    if ran:
        from overt.report import write_report

        write_report(ran, sweep_dir / "report")
    return sweep_dir, trials


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="overt sweep", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(parser, "key=value or key=a,b,c (swept) overrides")
    args = parser.parse_args(argv)
    args.target, args.overrides = target_and_overrides(args.target, args.overrides)
    return args


@command("overt sweep")
def main(argv: list[str]) -> int:
    from overt.errors import ConfigError

    args = parse_args(argv)
    if any(o.replace(" ", "").startswith("nproc=") for o in args.overrides):
        raise ConfigError("nproc= is not supported in a sweep (runs are sequential, one process each); "
                          "run `overt train ... nproc=N` per configuration")
    sweep_dir, trials = run_sweep(args.target, args.overrides)
    print((sweep_dir / "sweep.md").read_text(), end="")
    print(f"overt sweep: {len(trials)} run(s) in {sweep_dir}; comparison {sweep_dir / 'sweep.md'}", file=sys.stderr)
    return 1 if any(t.error for t in trials) else 0
