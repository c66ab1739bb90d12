"""Output formats: text (one line per finding), JSON and SARIF 2.1.0."""

from __future__ import annotations

import json
from dataclasses import dataclass

from overt.catalog import ENTRIES, Severity, lookup
from overt.findings import Finding
from overt.lint.severity import DEFAULT_LEVELS


@dataclass
class LintProblem:
    """A file lint could not read or parse (or a path that does not exist): reported beside the
    findings, in every format, and the run exits 2."""

    message: str
    path: str | None = None
    line: int | None = None
    col: int | None = None

DOCS_URL = "https://github.com/overt-ml/overt/blob/main/docs/lint.md"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def text_line(f: Finding) -> str:
    """``path:line:col: CODE slug [severity] message`` (notebooks: ``path:cell N:line:col: ...``)."""
    cell = f.details.get("cell")
    loc = f"{f.path}:cell {cell}:{f.line}:{f.col}" if cell is not None else f"{f.path}:{f.line}:{f.col}"
    return f"{loc}: {f.code} {f.slug} [{Severity(f.severity).value}] {f.message}"


def to_json(findings: list[Finding], problems: list[LintProblem] = ()) -> str:
    """A list: one object per finding, then one per file that could not be read or parsed
    (``{"error": true, "path", "line", "col", "message", "severity": "error"}``)."""
    out: list[dict] = []
    for f in findings:
        item = {"path": f.path, "line": f.line, "col": f.col, "code": f.code, "slug": f.slug,
                "message": f.message, "severity": Severity(f.severity).value, "why": f.why, "fix": f.fix}
        if "cell" in f.details:
            item["cell"] = f.details["cell"]
        if "fix" in f.details:
            item["autofix"] = f.details["fix"]
        out.append(item)
    for p in problems:
        out.append({"error": True, "path": p.path, "line": p.line, "col": p.col, "severity": "error",
                    "message": p.message})
    return json.dumps(out, indent=2)


def _notification(p: LintProblem) -> dict:
    note: dict = {"level": "error", "message": {"text": p.message}, "descriptor": {"id": "parse-error"}}
    if p.path is not None:
        region = {"startLine": p.line, "startColumn": p.col} if p.line else {}
        loc = {"artifactLocation": {"uri": p.path}}
        if region:
            loc["region"] = region
        note["locations"] = [{"physicalLocation": loc}]
    return note


def to_sarif(findings: list[Finding], version: str, problems: list[LintProblem] = ()) -> str:
    """SARIF 2.1.0; files that could not be read or parsed are ``toolExecutionNotifications`` of the
    run's invocation (``executionSuccessful`` false then)."""
    rules = [e for e in ENTRIES if e.static]
    index = {e.slug: i for i, e in enumerate(rules)}
    results = []
    for f in findings:
        entry = lookup(f.slug)
        region = {"startLine": f.line, "startColumn": f.col}
        result = {
            "ruleId": entry.code,
            "ruleIndex": index[f.slug],
            "level": _SARIF_LEVEL[Severity(f.severity).value],
            "message": {"text": f"{f.slug}: {f.message}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.path}, "region": region}}],
        }
        result["properties"] = {"why": f.why, "fix": f.fix}
        if "cell" in f.details:
            result["properties"]["cell"] = f.details["cell"]
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "overt",
                "version": version,
                "informationUri": DOCS_URL,
                "rules": [{
                    "id": e.code,
                    "name": e.slug,
                    "shortDescription": {"text": e.title},
                    "fullDescription": {"text": e.why},
                    "helpUri": f"{DOCS_URL}#{e.slug}",
                    "defaultConfiguration": {"level": _SARIF_LEVEL[DEFAULT_LEVELS[e.slug].value]},
                } for e in rules],
            }},
            "invocations": [{
                "executionSuccessful": not problems,
                "toolExecutionNotifications": [_notification(p) for p in problems],
            }],
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2)
