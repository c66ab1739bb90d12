"""Lint a corpus of public PyTorch projects and say how precise lint is on it.

    python benchmarks/lint_corpus/run.py [--group tuned|known|dev|test|fresh-dev|fresh-test|fresh2-dev|fresh2-test|fresh3-dev|fresh3-test|fresh4-dev|fresh4-test|fresh5-dev|fresh5-test|fresh6-dev|fresh6-test|fresh7-dev|fresh7-test|fresh8-dev|fresh8-test|fresh9-dev|fresh9-test|fresh10-dev|fresh10-test|fresh11-dev|fresh11-test]
                                         [--mirror DIR] [--verdicts FILE]
                                         [--findings OUT] [--only SLUG,...]

The corpus is ``manifest.json`` beside this script: for each project its GitHub repository, the
commit, and the paths inside it.  The repositories' code is never kept in this repository: each
one is read from a bare git mirror (``DIR/<owner>+<name>/repo``, or ``DIR/<owner>+<name>.git``;
make one with ``git clone --bare https://github.com/<owner>/<name> DIR/<owner>+<name>/repo``) and
its Python files and packaging files (pyproject.toml, setup.cfg, setup.py, requirements*.txt,
which lint reads for the project's torch floor) at the pinned commit are written into a temporary
directory, one sub-directory per project, which is then linted project by project with the default
settings a new user gets.

Groups (``--group``, default ``tuned``): ``tuned`` is the corpus the rules were built on (issues 20
and 22, ``verdicts.txt``); ``known`` the ten codebases of issue 30 whose false findings were described
there (``verdicts-known.txt``); ``dev`` and ``test`` the two halves of the projects added for issue 30,
drawn by ``split.py`` (``split.json``; ``verdicts-dev.txt``, ``verdicts-test.txt``); ``fresh-dev`` and
``fresh-test`` the two halves of the ten projects added for issue 33, which no session had linted
before (``split-fresh.json``, seed 20261127; ``verdicts-fresh-dev.txt``, ``verdicts-fresh-test.txt``); ``fresh2-dev``
and ``fresh2-test`` the two halves of ten more such projects added in session 46 (``split-fresh2.json``, seed
20261128; ``verdicts-fresh2-dev.txt``, ``verdicts-fresh2-test.txt``); ``fresh3-dev`` and ``fresh3-test`` the
two halves of ten more added in session 47 (``split-fresh3.json``, seed 20261129; ``verdicts-fresh3-dev.txt``,
``verdicts-fresh3-test.txt``); ``fresh4-dev`` and ``fresh4-test`` the two halves of ten more added in session 49
(``split-fresh4.json``, seed 20261203; ``verdicts-fresh4-dev.txt``, ``verdicts-fresh4-test.txt``); ``fresh5-dev`` and
``fresh5-test`` the two halves of ten more added in session 50 (``split-fresh5.json``, seed 20261205;
``verdicts-fresh5-dev.txt``, ``verdicts-fresh5-test.txt``); ``fresh6-dev`` and ``fresh6-test`` the two halves of
ten more added in session 51 (``split-fresh6.json``, seed 20261207; ``verdicts-fresh6-dev.txt``,
``verdicts-fresh6-test.txt``); ``fresh7-dev`` and ``fresh7-test`` the two halves of ten more added in session 52
(``split-fresh7.json``, seed 20261209; ``verdicts-fresh7-dev.txt``, ``verdicts-fresh7-test.txt``); ``fresh8-dev`` and
``fresh8-test`` the two halves of ten more added in session 53 (``split-fresh8.json``, seed 20261211;
``verdicts-fresh8-dev.txt``, ``verdicts-fresh8-test.txt``); ``fresh9-dev`` and ``fresh9-test`` the two halves of ten
more added in session 54 (``split-fresh9.json``, seed 20261213; ``verdicts-fresh9-dev.txt``,
``verdicts-fresh9-test.txt``); ``fresh10-dev`` and ``fresh10-test`` the two halves of ten more added in session 55
(``split-fresh10.json``, seed 20261215; ``verdicts-fresh10-dev.txt``, ``verdicts-fresh10-test.txt``); ``fresh11-dev`` and
``fresh11-test`` the two halves of ten more added in session 56 (``split-fresh11.json``, seed 20261217;
``verdicts-fresh11-dev.txt``, ``verdicts-fresh11-test.txt``).  Projects whose
manifest entry says ``"notebooks": true`` have their ``.ipynb`` files linted too.

Printed: a per-project table (files, lines, findings, seconds) and a per-rule table of findings.
With ``--verdicts`` (``verdicts.txt`` beside this script by default when it exists), every
finding is matched with its judged verdict (true / debatable / false) and precision is printed:
strict (true / all) and "worth a change" ((true + debatable) / all); findings with no verdict
are listed, so the verdicts file can be kept complete.  ``--findings`` writes every finding,
one per line, in the verdicts file's format (verdict ``?``) to start or extend it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from overt.lint import lint_paths  # noqa: E402
from overt.lint.config import LintConfig  # noqa: E402

PACKAGING = ("pyproject.toml", "setup.cfg", "setup.py")


def _git_dir(mirror: Path, repo: str) -> Path:
    base = repo.replace("/", "+")
    for cand in (mirror / base / "repo", mirror / base / "repo" / ".git", mirror / f"{base}.git", mirror / base):
        if (cand / "HEAD").is_file():
            return cand
    raise SystemExit(f"no mirror of {repo} under {mirror}: clone it with "
                     f"`git clone --bare https://github.com/{repo} {mirror / base / 'repo'}`")


def _wanted(path: str, roots: list[str], notebooks: bool = False) -> bool:
    name = path.rsplit("/", 1)[-1]
    if not (path.endswith(".py") or (notebooks and path.endswith(".ipynb")) or name in PACKAGING or (name.startswith("requirements") and name.endswith(".txt"))):
        return False
    return any(not r or path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def extract(git_dir: Path, commit: str, roots: list[str], dest: Path, notebooks: bool = False) -> int:
    """Write the wanted files of ``commit`` under ``dest``; return how many."""
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout.decode("utf-8", "replace")
    blobs = []
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and mode != "120000" and _wanted(path, roots, notebooks):
            blobs.append((sha, path))
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                          input="".join(f"{sha}\n" for sha, _ in blobs).encode(), capture_output=True, check=True)
    out, pos, n = proc.stdout, 0, 0
    for sha, path in blobs:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].split()
        pos = header_end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        data = out[pos:pos + size]
        pos += size + 1
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        n += 1
    return n


def read_verdicts(path: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """``VERDICT  rule  project/path:line  reason`` lines -> {(rule, location): (verdict, reason)}."""
    out = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        if len(parts) < 3:
            continue
        out[(parts[1], parts[2])] = (parts[0], parts[3] if len(parts) > 3 else "")
    return out


def _lines(path: Path) -> int:
    """Lines of a source file; of a notebook, the lines of its code cells."""
    if path.suffix != ".ipynb":
        return path.read_bytes().count(b"\n")
    try:
        cells = json.loads(path.read_bytes()).get("cells", [])
    except (ValueError, AttributeError):
        return 0
    src = [c.get("source", "") for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
    return sum(len(s) if isinstance(s, list) else s.count("\n") + 1 for s in src)


GROUPS = ("tuned", "known", "dev", "test", "fresh-dev", "fresh-test", "fresh2-dev", "fresh2-test", "fresh3-dev", "fresh3-test",
          "fresh4-dev", "fresh4-test", "fresh5-dev", "fresh5-test", "fresh6-dev", "fresh6-test",
          "fresh7-dev", "fresh7-test", "fresh8-dev", "fresh8-test", "fresh9-dev", "fresh9-test",
          "fresh10-dev", "fresh10-test", "fresh11-dev", "fresh11-test")


def select(projects: list[dict], group: str) -> list[dict]:
    """The manifest's projects of ``group`` (``dev``/``test``: the halves split.json drew;
    ``fresh-dev``/``fresh-test``: the halves split-fresh.json drew; ``fresh2-dev``/``fresh2-test``: those of
    split-fresh2.json; ``fresh3-dev``/``fresh3-test``: those of split-fresh3.json; ``fresh4-dev``/``fresh4-test``: those of
    split-fresh4.json; ``fresh5-dev``/``fresh5-test``: those of split-fresh5.json; ``fresh6-dev``/``fresh6-test``:
    those of split-fresh6.json; ``fresh7-dev``/``fresh7-test``: those of split-fresh7.json; ``fresh8-dev``/``fresh8-test``:
    those of split-fresh8.json; ``fresh9-dev``/``fresh9-test``: those of split-fresh9.json; ``fresh10-dev``/``fresh10-test``: those of split-fresh10.json;
    ``fresh11-dev``/``fresh11-test``: those of split-fresh11.json)."""
    if group == "tuned":
        return [p for p in projects if "group" not in p]
    if group == "known":
        return [p for p in projects if p.get("group") == "known"]
    kind, _, half_name = group.rpartition("-")
    split = f"split-{kind}.json" if kind else "split.json"
    half = set(json.loads((HERE / split).read_text())[half_name])
    return [p for p in projects if p.get("group") == (kind or "new") and p["slug"] in half]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default=os.environ.get("OVERT_CORPUS_MIRROR", "/work/.mirror"))
    ap.add_argument("--group", default="tuned", choices=GROUPS, help="which projects (default: tuned)")
    ap.add_argument("--verdicts", help="verdicts file (default: verdicts.txt for tuned, verdicts-GROUP.txt else)")
    ap.add_argument("--findings", help="write every finding (verdicts format, verdict '?') to this file")
    ap.add_argument("--only", help="comma-separated project slugs")
    ap.add_argument("--json", help="write the per-project and per-rule counts as JSON here")
    ap.add_argument("--min-severity", default="warning", choices=("info", "warning", "error"),
                    help="lowest level counted (default: warning, what a new user sees)")
    args = ap.parse_args(argv)
    manifest = select(json.loads((HERE / "manifest.json").read_text())["projects"], args.group)
    if not args.verdicts:
        args.verdicts = str(HERE / ("verdicts.txt" if args.group == "tuned" else f"verdicts-{args.group}.txt"))
    if args.only:
        keep = set(args.only.split(","))
        manifest = [p for p in manifest if p["slug"] in keep]
    mirror = Path(args.mirror)
    rows, all_found, unparsed = [], [], []
    cpu_time = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for proj in manifest:
            dest = Path(tmp) / proj["slug"]
            dest.mkdir()
            extract(_git_dir(mirror, proj["repo"]), proj["commit"], proj["paths"], dest, proj.get("notebooks", False))
            files = sorted(dest.rglob("*.py")) + sorted(dest.rglob("*.ipynb"))
            lines = sum(_lines(f) for f in files)
            t0, c0 = time.perf_counter(), time.process_time()
            levels = {"min_severity": args.min_severity} if hasattr(LintConfig, "min_severity") else {}
            skipped: list[str] = []
            found, errors = lint_paths([dest], LintConfig(root=dest, **levels), skipped=skipped)
            errors = errors + skipped
            dt = time.perf_counter() - t0
            cpu_time += time.process_time() - c0
            for f in found:
                rel = Path(f.path).resolve().relative_to(Path(tmp).resolve()).as_posix().replace(" ", "%20")
                cell = f.details.get("cell")  # a notebook's line counts in its cell
                all_found.append((f.slug, f"{rel}:{f'cell{cell}:' if cell else ''}{f.line}", f))
            rows.append((proj["slug"], len(files), lines, len(found), len(errors), dt))
            unparsed.extend(str(e).replace(str(Path(tmp)) + os.sep, "") for e in errors)
    total_lines = sum(r[2] for r in rows)
    total_time = sum(r[5] for r in rows)
    print(f"{'project':<20} {'files':>6} {'lines':>8} {'findings':>8} {'unparsed':>8} {'seconds':>8}")
    for slug, nf, nl, nfind, nerr, dt in rows:
        print(f"{slug:<20} {nf:>6} {nl:>8} {nfind:>8} {nerr:>8} {dt:>8.2f}")
    print(f"{'total':<20} {sum(r[1] for r in rows):>6} {total_lines:>8} {len(all_found):>8} "
          f"{sum(r[4] for r in rows):>8} {total_time:>8.2f}")
    print(f"speed: {total_lines / total_time:,.0f} lines/s in-process wall time, {total_lines / cpu_time:,.0f} lines "
          f"per CPU second (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    for u in unparsed:
        print(f"  unparsed: {u}")
    by_rule = Counter(s for s, _, _ in all_found)
    print("\nfindings per rule:")
    for slug, n in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {slug:<28} {n:>4}")
    if args.findings:
        with open(args.findings, "w") as fh:
            for slug, loc, f in sorted(all_found, key=lambda t: (t[1], t[0])):
                fh.write(f"?  {slug}  {loc}  {f.message}\n")
    verdicts_path = Path(args.verdicts)
    if verdicts_path.is_file():
        verdicts = read_verdicts(verdicts_path)
        counts: Counter[str] = Counter()
        per_rule: dict[str, Counter[str]] = {}
        missing = []
        for slug, loc, _ in all_found:
            v = verdicts.get((slug, loc), ("?", ""))[0]
            if v == "?":
                missing.append(f"{slug}  {loc}")
            counts[v] += 1
            per_rule.setdefault(slug, Counter())[v] += 1
        n = len(all_found)
        print(f"\nverdicts ({verdicts_path.name}): " + ", ".join(f"{k} {counts[k]}" for k in
                                                                 ("true", "debatable", "false", "?")))
        for slug, c in sorted(per_rule.items()):
            print(f"  {slug:<28} true {c['true']:>3}  debatable {c['debatable']:>3}  false {c['false']:>3}"
                  f"  unjudged {c['?']:>3}")
        if n:
            print(f"precision: strict {counts['true'] / n:.0%} (true / all); worth a change "
                  f"{(counts['true'] + counts['debatable']) / n:.0%} ((true + debatable) / all) of {n} findings "
                  f"over {total_lines:,} lines")
        for m in missing:
            print(f"  no verdict: {m}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "projects": [dict(zip(("slug", "files", "lines", "findings", "unparsed", "seconds"), r)) for r in rows],
            "rules": dict(by_rule)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
