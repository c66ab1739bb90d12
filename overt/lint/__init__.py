"""``overt lint``: find the catalog's silent training failures in source, without running it.

Public API::

    from overt.lint import lint_paths, lint_source_findings
    findings, errors = lint_paths(["train.py"])

Lint never imports torch: it reads code with :mod:`ast`.
"""

from __future__ import annotations

from pathlib import Path

from overt.findings import Finding
from overt.lint.analysis.project import Project
from overt.lint.config import LintConfig, find_pyproject, load_config
from overt.lint.engine import FileResult, cyclic_gc_paused, lint_file, lint_source
from overt.lint.files import discover


def lint_paths(paths: list[str | Path], config: LintConfig | None = None,
               skipped: list[str] | None = None) -> tuple[list[Finding], list[str]]:
    """Lint files and directories; return (findings, error messages for unreadable/unparseable files).
    Findings come at the configured levels; those below ``config.min_severity`` (info, by default)
    are left out.  Notebook cells (or notebooks) that could not be parsed are skipped, not errors:
    pass a list as ``skipped`` to collect what was skipped, and why."""
    ps = [Path(p) for p in paths]
    if config is None:
        config = load_config(find_pyproject(ps[0] if ps else Path.cwd()))
    files, errors = discover(ps, config.exclude, config.root)
    findings: list[Finding] = []
    project = Project(config.root)
    with cyclic_gc_paused():
        for f in files:
            res = lint_file(f, config.rules_for(f), project)
            if res.error:
                errors.append(res.error)
            if skipped is not None:
                skipped.extend(res.skipped)
            findings.extend(res.findings)
    return config.present(findings), errors


def lint_source_findings(source: str, path: str = "<string>", select: set[str] | None = None) -> list[Finding]:
    """Findings for a source string (raises SyntaxError when it does not parse)."""
    from overt.lint.engine import _finding

    return [_finding(h, path, None) for h in lint_source(source, path, select)]


__all__ = ["lint_paths", "lint_source_findings", "lint_source", "lint_file", "FileResult", "LintConfig"]
