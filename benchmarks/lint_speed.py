"""Lines per second of ``overt lint`` over a generated tree of training code.

    python benchmarks/lint_speed.py [--lines 12000] [--repeats 5]

The tree is built in a temporary directory by replicating the lint test
fixtures (correct and incorrect training scripts, modules, notebooks' worth of
loops: ``tests/lint/fixtures/**/*.py``) and the multi-file sample projects
(``tests/lint/projects/``: packages whose modules import each other, so the
project index follows imports across files) into sub-directories until it
holds at least ``--lines`` lines.  Two timings are reported, each the median of
``--repeats`` runs:

- in-process: ``overt.lint.lint_paths`` over the tree (discovery + parse + project
  index + rules);
- command line: ``python -m overt lint TREE`` wall time, interpreter start included.

Targets: the whole 10,000+ line tree in under 2 seconds (issue 4), and at least
10,000 lines/s in-process with the project index on (issue 11).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from overt.lint import lint_paths  # noqa: E402
from overt.lint.config import LintConfig  # noqa: E402


def build_tree(root: Path, min_lines: int) -> tuple[int, int]:
    """Copy the fixtures into ``root`` until it has ``min_lines`` lines; return (files, lines)."""
    lint = REPO / "tests" / "lint"
    sources = [(src, Path(src.parent.name) / src.name) for src in sorted((lint / "fixtures").glob("**/*.py"))]
    sources += [(src, src.relative_to(lint)) for src in sorted((lint / "projects").glob("**/*.py"))]
    files = lines = copy = 0
    while lines < min_lines:
        for src, rel in sources:
            dest = root / f"pkg{copy:03d}" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            files += 1
            lines += src.read_text().count("\n")
        copy += 1
    return files, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=12000, help="minimum lines in the generated tree")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        n_files, n_lines = build_tree(root, args.lines)
        in_proc, cli, cpu = [], [], []
        findings = 0
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            found, errors = lint_paths([root], LintConfig(root=root))
            in_proc.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            assert not errors, errors
            findings = len(found)
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "overt", "lint", str(root)], cwd=REPO,
                                  capture_output=True, text=True)
            cli.append(time.perf_counter() - t0)
            assert proc.returncode in (0, 1), proc.stderr
        t_in, t_cli = statistics.median(in_proc), statistics.median(cli)
        print(f"tree: {n_files} files, {n_lines} lines, {findings} findings")
        print(f"in-process  : {t_in:.3f} s  -> {n_lines / t_in:,.0f} lines/s")
        t_cpu = statistics.median(cpu)
        print(f"CPU time    : {t_cpu:.3f} s  -> {n_lines / t_cpu:,.0f} lines per CPU second (in-process)")
        print(f"command line: {t_cli:.3f} s  -> {n_lines / t_cli:,.0f} lines/s (interpreter start included)")
        print(f"targets: < 2 s for the whole tree: {'met' if t_cli < 2.0 else 'NOT met'}; "
              f">= 10,000 lines/s in-process: {'met' if n_lines / t_in >= 10_000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
