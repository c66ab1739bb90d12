"""``overt report RUN_DIR [RUN_DIR ...] [--out DIR] [--csv]``"""

from __future__ import annotations

import argparse
import sys

from overt.command import command

HELP = """\
Plots and a markdown report of one run, or several runs compared.

  overt report runs/digits-20260101-120000            writes runs/digits-.../report/
  overt report runs/a runs/b --out compare            overlaid curves, config keys that differ
  overt report runs/a --csv                           also metrics.csv for spreadsheets

Works on finished, failed, stopped and running (or killed) runs: it reads what is there.
Plots need matplotlib (pip install 'overt[plots]'); without it report.md is still written.
Exit status: 0 when the report was written, 2 when a folder is not a run directory.
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="overt report", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by overt train")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: RUN_DIR/report for one run, ./overt-report-<time> for several)")
    parser.add_argument("--csv", action="store_true", help="also write metrics.csv (every logged record of every run)")
    return parser.parse_args(argv)


@command("overt report")
def main(argv: list[str]) -> int:
    from overt.report import write_report

    args = parse_args(argv)
    result = write_report(args.run_dirs, args.out, csv=args.csv)
    for problem in result.problems:
        print(f"overt report: warning: {problem}", file=sys.stderr)
    if result.note:
        print(f"overt report: {result.note}\n  report.md still has the tables.", file=sys.stderr)
    print(f"overt report: wrote {result.markdown}")
    if result.plots:
        print(f"  {len(result.plots)} plots in {result.markdown.parent} (overview: {result.plots[0].name})")
    if result.csv is not None:
        print(f"  metrics as CSV: {result.csv}")
    return 0
