"""Each built-in recipe trained to its stated validation metric, as a user runs it: the metric reached
and the time taken (training wall time from summary.json, and the whole command's time).

    python benchmarks/recipes.py [--only tiny,mnist] [--out results.json]

Data comes from ../shared/data (MNIST t10k IDX, the sentiment sentences, Tiny
Shakespeare) relative to the repository root; a recipe whose data is absent is
reported as skipped.  The house-prices CSV is the recipe's own synthetic
generator (1,000 rows, seed 0).  ``finetune`` starts from the ``resnet`` run
of the same invocation.  Prints a Markdown table for docs/recipes.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def plan(tmp: Path) -> list[tuple[str, list[str], str, Path | None]]:
    """(name, `overt train` arguments, metric, data that must exist)."""
    return [
        ("tiny", ["tiny"], "val/accuracy", None),
        ("house-prices", ["house-prices", f"csv={tmp / 'houses.csv'}"], "val/r2", None),
        ("sentiment", ["sentiment", f"data_dir={DATA / 'sentiment-sentences'}"], "val/accuracy",
         DATA / "sentiment-sentences"),
        ("mnist", ["mnist", f"data_dir={DATA / 'mnist-t10k'}"], "val/accuracy", DATA / "mnist-t10k"),
        ("resnet", ["resnet"], "val/accuracy", None),
        ("finetune", ["finetune", f"init_from={tmp / 'resnet'}", "data=mnist", f"data_dir={DATA / 'mnist-t10k'}",
                      "limit=2000"], "val/accuracy", DATA / "mnist-t10k"),
        ("char-rnn", ["char-rnn", f"text={DATA / 'tinyshakespeare' / 'input.txt'}", "limit_chars=200000"],
         "val/perplexity", DATA / "tinyshakespeare"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated recipe names")
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    results = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        from overt.recipes.house_prices import write_synthetic_csv

        write_synthetic_csv(tmp / "houses.csv", rows=1000, seed=0)
        for name, train_args, metric, needs in plan(tmp):
            if only and name not in only:
                continue
            if needs is not None and not needs.exists():
                print(f"{name}: skipped, {needs} is absent", file=sys.stderr)
                results.append({"recipe": name, "skipped": f"{needs} absent"})
                continue
            command = [sys.executable, "-m", "overt", "train", *train_args, f"run_dir={tmp / name}", "progress=off"]
            start = time.perf_counter()
            proc = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO)
            elapsed = time.perf_counter() - start
            if proc.returncode != 0:
                print(f"{name}: failed\n{proc.stderr}", file=sys.stderr)
                results.append({"recipe": name, "failed": proc.stderr[-2000:]})
                continue
            summary = json.loads((tmp / name / "summary.json").read_text())
            shown = " ".join(a.replace(str(DATA), "../shared/data").replace(str(tmp), "runs") for a in train_args)
            row = {"recipe": name, "command": f"overt train {shown}", "metric": metric,
                   "value": summary["final"].get(metric), "epochs": summary["epochs"],
                   "train_s": summary["wall_time_s"], "command_s": round(elapsed, 1)}
            results.append(row)
            print(f"{name}: {metric}={row['value']:.4g} in {row['train_s']:.1f}s training "
                  f"({row['command_s']:.1f}s command)", file=sys.stderr)
    print("| recipe | command | metric | reached | epochs | training time | whole command |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if "value" in r:
            print(f"| `{r['recipe']}` | `{r['command']}` | {r['metric']} | {r['value']:.4g} | {r['epochs']} | "
                  f"{r['train_s']:.1f} s | {r['command_s']:.1f} s |")
        else:
            print(f"| `{r['recipe']}` | | | {'skipped' if 'skipped' in r else 'FAILED'} | | | |")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all("failed" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
