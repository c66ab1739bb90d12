"""``report.md``: summary table, config keys that differ, plots, guard findings, each run's config."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from overt.report.series import differing_config, run_labels
from overt.run.reader import RunRecord
from overt.run.rundir import RunDir


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        text = f"{value:.4g}" if math.isfinite(value) else str(value)
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def status_text(run: RunRecord, now: float | None = None) -> str:
    """One line: how the run ended, or that it has not (yet)."""
    state = run.state
    epochs, steps = run.progress()
    if state in ("completed", "stopped"):
        preempted = (run.summary or {}).get("preempted")
        extra = f", stopped by {preempted.get('signal', 'a signal')}" if isinstance(preempted, dict) else ""
        return f"{state}{extra}"
    if state in ("failed", "interrupted"):
        error = run.status.get("error", "")
        return f"{state} at epoch {run.status.get('epoch', epochs) + 1}, step {run.status.get('step', steps)}" + \
            (f": {error}" if error else "")
    metrics = RunDir(run.path).metrics
    age = ""
    if metrics.is_file():
        seconds = (now or time.time()) - metrics.stat().st_mtime
        age = f"; metrics last written {_age(seconds)} ago"
    if state == "running":
        from overt.run.lock import describe_holder

        return f"running: {describe_holder(run.holder or {})}{age}"
    return f"{state}: no summary.json and no process holds the run (killed, or its last status write failed{age})"


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def summary_rows(runs: list[RunRecord]) -> list[list[Any]]:
    """Rows of the summary table (one column per run)."""
    rows: list[list[Any]] = [["status", *(r.state for r in runs)]]
    progress = [r.progress() for r in runs]
    rows.append(["epochs", *(p[0] for p in progress)])
    rows.append(["optimizer steps", *(p[1] for p in progress)])
    rows.append(["wall time (s)", *((r.summary or {}).get("wall_time_s") for r in runs)])
    rows.append(["device", *((r.summary or {}).get("device") for r in runs)])
    rows.append(["precision", *((r.summary or {}).get("precision") or r.config.get("precision") for r in runs)])
    bests = [r.best() for r in runs]
    rows.append(["best", *(f"{b['metric']} = {_cell(b['value'])} at step {b['step']}" if b else None
                           for b in bests)])
    finals = [r.final_metrics() for r in runs]
    keys: dict[str, None] = {}
    for final in finals:
        keys.update(dict.fromkeys(final))
    rows += [[f"final {key}", *(final.get(key) for final in finals)] for key in keys]
    rows.append(["guard findings", *(None if r.findings is None else len(r.findings) for r in runs)])
    return rows


def _findings(run: RunRecord) -> list[str]:
    if run.findings is None:
        return ["none recorded (the guards write them when a run ends; a failed run's error above names a "
                "guard that stopped it)"]
    if not run.findings:
        return ["none"]
    out = []
    for f in run.findings:
        where = f" {f.get('where')}" if f.get("where") else ""
        step = f" (step {f['step']})" if f.get("step") is not None else ""
        out.append(f"- **{f.get('code', '')} {f.get('slug', '')}** [{f.get('severity', '')}]{where}{step}: "
                   f"{f.get('message', '')}")
    return out


def render(runs: list[RunRecord], plots: list[Path], out_dir: Path, plots_note: str = "") -> str:
    """The report's markdown; ``plots`` are embedded by their path relative to ``out_dir``."""
    labels = run_labels(runs)
    title = labels[0] if len(runs) == 1 else f"{len(runs)} runs"
    lines = [f"# overt report: {title}", ""]
    lines += [f"- `{run.path}`: {status_text(run)}" for run in runs]
    lines += ["", "## Summary", "", table(["", *labels], summary_rows(runs)), ""]
    if len(runs) > 1:
        diff = differing_config(runs)
        lines += ["## Config keys that differ", ""]
        lines += [table(["key", *labels], [[k, *v] for k, v in diff.items()]) if diff else "none", ""]
    lines += ["## Plots", ""]
    if plots:
        for path in plots:
            rel = Path(os.path.relpath(Path(path).resolve(), Path(out_dir).resolve())).as_posix()
            lines += [f"![{Path(path).stem}]({rel})", ""]
    else:
        lines += [plots_note or "no metrics logged yet", ""]
    lines += ["## Guard findings", ""]
    for run, label in zip(runs, labels):
        if len(runs) > 1:
            lines += [f"### {label}", ""]
        lines += [*_findings(run), ""]
    if any(run.problems for run in runs):
        lines += ["## Files that could not be read", ""]
        for run, label in zip(runs, labels):
            lines += [f"- {label}: {problem}" for problem in run.problems]
        lines += [""]
    lines += ["## Config", ""]
    for run, label in zip(runs, labels):
        import yaml

        text = yaml.safe_dump(run.config, sort_keys=False).strip() if run.config else "(no config.yaml)"
        lines += [f"<details><summary>{label}</summary>", "", "```yaml", text, "```", "", "</details>", ""]
    return "\n".join(lines)
