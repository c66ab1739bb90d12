"""See your runs: plots, a markdown report, run comparison and a CSV export.

Everything here reads run directories (through :mod:`overt.run.reader`), so it works
on finished, failed, stopped and still-running (or killed) runs alike::

    from overt.report import write_report
    result = write_report(["runs/a", "runs/b"], out_dir="compare", csv=True)

Plots need matplotlib (the ``plots`` extra); without it the markdown report is
still written and ``result.note`` says what to install."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

__all__ = ["ReportResult", "default_out_dir", "write_report"]


@dataclass
class ReportResult:
    """What :func:`write_report` wrote."""

    markdown: Path
    plots: list[Path] = field(default_factory=list)
    csv: Path | None = None
    note: str = ""  # set when plots were skipped (matplotlib missing)
    problems: list[str] = field(default_factory=list)  # run files that could not be read (and were ignored)


def default_out_dir(run_dirs: Sequence[str | Path]) -> Path:
    """``RUN_DIR/report`` for one run; ``overt-report-<timestamp>`` in the current folder for several."""
    if len(run_dirs) == 1:
        from overt.run.rundir import RunDir

        return RunDir(run_dirs[0]).report
    return Path(f"overt-report-{time.strftime('%Y%m%d-%H%M%S')}")


def _checked(out: Path, run_dirs: Sequence[str | Path]) -> Path:
    """``out``; when it lies inside one of the run directories (``RUN/report``), checked as that run's
    folder: a planted link there is refused, never followed out of the run directory."""
    import os

    from overt.run.rundir import RunDir

    where = Path(os.path.abspath(out))
    for run_dir in run_dirs:
        root = Path(os.path.abspath(run_dir))
        if where != root and root in where.parents:
            return RunDir(root).folder(where)
    return out


def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path | None = None,
                 csv: bool = False) -> ReportResult:
    """Read the runs and write ``report.md``, the plots (when matplotlib is installed) and,
    with ``csv``, ``metrics.csv`` into ``out_dir``."""
    from overt.report.markdown import render
    from overt.report.plots import MissingExtraError, write_plots
    from overt.run.atomic import write_text_atomic
    from overt.run.reader import read_run

    runs = [read_run(d) for d in run_dirs]
    out = Path(out_dir) if out_dir is not None else default_out_dir(run_dirs)
    try:
        out = _checked(out, run_dirs)
        out.mkdir(parents=True, exist_ok=True)
        result = ReportResult(markdown=out / "report.md")
        try:
            result.plots = write_plots(runs, out)
        except MissingExtraError as exc:
            result.note = str(exc)
        if csv:
            from overt.report.export import write_csv

            result.csv = write_csv(runs, out / "metrics.csv")
        note = f"Plots skipped: {result.note}" if result.note else ""
        write_text_atomic(result.markdown, render(runs, result.plots, out, plots_note=note.replace("\n", " ")))
    except OSError as exc:
        from overt.errors import OvertError

        raise OvertError(f"cannot write the report to {out}: {exc.strerror or exc}",
                         why="the output folder must be a writable folder (it is created when missing)",
                         fix="choose another folder with --out") from None
    result.problems = [f"{run.name}: {problem}" for run in runs for problem in run.problems]
    return result
