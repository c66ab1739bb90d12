"""The comparison of ``overt sweep``: ``sweep.md`` (runs ranked, best first) and ``sweep.json``.

Each run is ranked by its own ``monitor`` and ``monitor_mode``.  When the runs do not share one
(``monitor`` swept), each monitor's runs are ranked on their own, in a table of their own, and
``sweep.md`` says that rankings are not comparable across monitors.  Both files are rewritten
after every run (atomically), so a stopped or killed sweep still shows what it has done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: a run's status in the comparison when it has no summary
FAILED, NOT_RUN = "failed", "not run"


@dataclass
class Trial:
    """One run of the sweep: its overrides, run directory, monitor and outcome."""

    overrides: dict[str, str]
    run_dir: Path
    monitor: str
    mode: str
    summary: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.overrides.items()) or "defaults"

    @property
    def status(self) -> str:
        if self.error:
            return FAILED
        status = (self.summary or {}).get("status")
        return str(status) if status else NOT_RUN

    @property
    def best(self) -> float | None:
        best = (self.summary or {}).get("best")
        value = best.get("value") if isinstance(best, dict) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def groups(trials: list[Trial]) -> list[tuple[str, str, list[Trial]]]:
    """(monitor, mode, its trials ranked best first, then those without a best value), one per
    monitor in the order the grid first names it."""
    found: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        found.setdefault((t.monitor, t.mode), []).append(t)
    out = []
    for (monitor, mode), members in found.items():
        scored = [t for t in members if t.best is not None]
        scored.sort(key=lambda t: t.best, reverse=(mode == "max"))  # type: ignore[arg-type,return-value]
        out.append((monitor, mode, scored + [t for t in members if t.best is None]))
    return out


def rank(trials: list[Trial]) -> list[Trial]:
    """Every trial, each monitor's ranked best first (see :func:`groups`)."""
    return [t for _, _, members in groups(trials) for t in members]


def _better(mode: str) -> str:
    return "lower" if mode == "min" else "higher"


def comparison(trials: list[Trial], state: str) -> str:
    """``sweep.md``."""
    from overt.report.markdown import table

    counts: dict[str, int] = {}
    for t in trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in counts.items())
    parts = [f"# Sweep: {len(trials)} run(s) ({tally}){'' if state == 'finished' else f'; the sweep is {state}'}", ""]
    ranked = groups(trials)
    if len(ranked) > 1:
        parts += ["The runs do not share one monitor (`monitor` is swept): rankings are not comparable across "
                  "monitors, so each monitor's runs are ranked on their own.", ""]
    for monitor, mode, members in ranked:
        rows = []
        for i, t in enumerate(members, 1):
            s = t.summary or {}
            best = s.get("best") if isinstance(s.get("best"), dict) else {}
            rows.append([i, t.label, f"failed: {t.error}" if t.error else t.status, t.best, best.get("step"),
                         s.get("epochs"), round(t.seconds, 1), t.run_dir.name])
        heading = f"ranked by {monitor} ({_better(mode)} is better)"
        parts += [f"## Runs {heading}" if len(ranked) > 1 else f"Runs {heading}:", "",
                  table(["rank", "overrides", "status", f"best {monitor}", "at step", "epochs", "seconds", "run"],
                        rows), ""]
    parts.append("Curves and the config keys that differ: [report/report.md](report/report.md).")
    return "\n".join(parts) + "\n"


def record(trials: list[Trial], state: str, keys: tuple[str, str], command: str) -> dict[str, Any]:
    """``sweep.json``: the sweep's state (``running``, ``stopped``, ``finished``), the keys of its plan
    (``plan``: the same command on the same recipe code continues a sweep; ``grid``: the same
    command) and every run, ranked."""
    monitors = {(t.monitor, t.mode) for t in trials}
    shared = next(iter(monitors)) if len(monitors) == 1 else (None, None)
    return {"state": state, "plan": keys[0], "grid": keys[1], "command": command, "monitor": shared[0],
            "mode": shared[1],
            "runs": [{"overrides": t.overrides, "run_dir": str(t.run_dir), "monitor": t.monitor, "mode": t.mode,
                      "status": t.status, "error": t.error, "seconds": round(t.seconds, 3),
                      "best": (t.summary or {}).get("best")} for t in rank(trials)]}


def write(sweep_dir: Path, trials: list[Trial], state: str, keys: tuple[str, str], command: str) -> None:
    """Write ``sweep.md`` and ``sweep.json`` (each atomically)."""
    from overt.run.atomic import write_text_atomic
    from overt.run.layout import json_safe

    write_text_atomic(sweep_dir / "sweep.md", comparison(trials, state))
    data = json_safe(record(trials, state, keys, command))
    write_text_atomic(sweep_dir / "sweep.json", json.dumps(data, indent=2) + "\n")
