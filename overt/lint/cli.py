"""``overt lint PATH...``: the command line.

Exit codes: 0 clean, 1 findings, 2 usage error or a file that cannot be read or parsed.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tokenize
from pathlib import Path

from overt.catalog import ENTRIES
from overt.errors import OvertError

from overt.command import command

EPILOG = """\
silencing: `# overt: ignore[slug]` (or `# noqa: OVT101`) on the line;
`# overt: ignore-file[slug]` in the file; [tool.overt] select/ignore/
per-file-ignores/exclude in pyproject.toml; --select/--ignore here.
Rules: docs/lint.md, or `overt lint --list-rules`.
exit codes: 0 clean, 1 findings, 2 usage error or unparseable file (a
notebook cell that does not parse is skipped and named on stderr; --strict
makes it an error too)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="overt lint", description="Find the catalog's silent training failures in source code, statically.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", default=None, help="files (.py, .ipynb) and directories (default: .)")
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="output format")
    p.add_argument("--select", metavar="RULES", help="comma-separated slugs/codes to run (replaces the config's)")
    p.add_argument("--ignore", metavar="RULES", help="comma-separated slugs/codes to skip (adds to the config's)")
    p.add_argument("--config", metavar="PYPROJECT", help="pyproject.toml to read [tool.overt] from")
    p.add_argument("--fix", action="store_true", help="apply the mechanical fixes and say what changed")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when something is found")
    p.add_argument("--min-severity", choices=("info", "warning", "error"),
                   help="lowest level shown (default: the config's min-severity, else warning; info is style)")
    p.add_argument("--no-ignore", action="store_true",
                   help="also lint files that .gitignore or [tool.overt] exclude would skip")
    p.add_argument("--strict", action="store_true",
                   help="a notebook (or notebook cell) that cannot be parsed is an error (exit 2), not a skip")
    p.add_argument("--list-rules", action="store_true", help="list every rule and exit")
    return p


def _list_rules() -> str:
    from overt.lint.rules import FIXABLE

    from overt.lint.severity import DEFAULT_LEVELS

    rows = [f"{e.code}  {e.slug:<30} {DEFAULT_LEVELS[e.slug].value:<8} {'fix' if e.slug in FIXABLE else '   '}  "
            f"{e.title}" for e in ENTRIES if e.static]
    return "\n".join(rows)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` so that a crash or a full disk leaves either the old
    file or the new one, never half of each: write a temporary file in the same folder, flush it to
    disk, give it the original's permission bits, then rename it over the original."""
    import tempfile

    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".overt-fix")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _under(f: Path, d: Path) -> bool:
    return f == d or d in f.parents  # discover() lists a directory's files under the path as given


@command("overt lint")
def main(argv: list[str]) -> int:
    """Entry point of ``overt lint``; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    if args.list_rules:
        print(_list_rules())
        return 0
    try:
        return _run(args)
    except BrokenPipeError:  # `overt lint ... | head`: the reader has gone; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        return 1


def _run(args: argparse.Namespace) -> int:
    from overt import __version__
    from overt.lint.config import STATIC_SLUGS, find_pyproject, load_config, resolve
    from overt.lint.engine import cyclic_gc_paused, lint_file, read_source
    from overt.lint.analysis.project import Project
    from overt.lint.files import discover, skipped_note
    from overt.lint.fix import apply_fixes
    from overt.lint.report import LintProblem, text_line, to_json, to_sarif

    paths = [Path(p) for p in (args.paths or ["."])]
    cfg_path = Path(args.config) if args.config else find_pyproject(paths[0])
    if args.config and not cfg_path.is_file():
        raise OvertError(f"--config {args.config}: no such file", fix="pass the path of a pyproject.toml")
    config = load_config(cfg_path)
    if args.select:
        config.select = resolve(args.select, "--select")
        runtime_only = sorted(s for s in config.select if s not in STATIC_SLUGS)
        if runtime_only:
            print(f"overt lint: {', '.join(runtime_only)} cannot be seen in source (runtime guards only); "
                  f"`overt run` or overt.guard() checks them", file=sys.stderr)
    if args.ignore:
        config.ignore |= resolve(args.ignore, "--ignore")
    if args.min_severity:
        config.min_severity = args.min_severity

    files, errors = discover(paths, config.exclude, config.root, respect_ignores=not args.no_ignore)
    problems: list[LintProblem] = [LintProblem(e) for e in errors]
    notes = []
    for p in paths:
        if p.is_dir() and not args.no_ignore and not any(_under(f, p) for f in files):
            note = skipped_note(p, config.exclude, config.root)
            if note:
                notes.append(note)
    findings = []
    fixed_notes: list[str] = []
    project = Project(config.root)
    with cyclic_gc_paused():
        for f in files:
            select = config.rules_for(f)
            res = lint_file(f, select, project)
            if args.fix and not res.error and res.notebook is None and any(h.edits for h in res.hits):
                source = read_source(f)
                new, done = apply_fixes(source, [h for h in res.hits if h.edits])
                if done and new != source:
                    encoding, _ = tokenize.detect_encoding(io.BytesIO(f.read_bytes()).readline)
                    write_atomically(f, new.encode(encoding))
                    for h in done:
                        code = next(e.code for e in ENTRIES if e.slug == h.slug)
                        fixed_notes.append(f"{res.path}:{h.line}:{h.col}: fixed {code} {h.slug}: {h.fix_note}")
                    res = lint_file(f, select, project)
            if res.error:
                errors.append(res.error)
                problems.append(LintProblem(res.error, res.path, *(res.error_at or (None, None))))
            for skip in res.skipped:
                if args.strict:
                    errors.append(skip)
                    problems.append(LintProblem(skip, res.path))
                else:
                    notes.append(f"{skip} (its other cells were linted; --strict makes this an error)")
            findings.extend(res.findings)
    findings = config.present(findings)

    out = sys.stdout
    if args.format == "json":
        print(to_json(findings, problems), file=out)
    elif args.format == "sarif":
        print(to_sarif(findings, __version__, problems), file=out)
    else:
        for line in fixed_notes:
            print(line, file=out)
        for f in findings:
            print(text_line(f), file=out)
    if args.format != "text":
        for line in fixed_notes:
            print(line, file=sys.stderr)
    for err in errors:
        print(f"overt lint: {err}", file=sys.stderr)
    for note in notes:
        print(f"overt lint: {note}", file=sys.stderr)
    if args.format == "text":
        from overt.lint.rules import FIXABLE

        n_fix = sum(1 for f in findings if f.slug in FIXABLE and f.details.get("fix"))
        plural = "s" if len(findings) != 1 else ""
        summary = f"{len(findings)} finding{plural} in {len(files)} file{'s' if len(files) != 1 else ''}"
        if n_fix and not args.fix:
            summary += f" ({n_fix} fixable with --fix)"
        if fixed_notes:
            summary += f"; fixed {len(fixed_notes)}"
        print(summary, file=sys.stderr)
    if errors:
        return 2
    if findings and not args.exit_zero:
        return 1
    return 0
