"""What one readiness probe found: :class:`ProbeResult`, in the catalog's terms."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from overt.catalog import Severity
from overt.findings import Finding


class Verdict(str, enum.Enum):
    """A probe's verdict.  ``fail`` makes ``overt doctor`` exit 1; ``warn`` only with ``--strict``."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"


_RANK = {Verdict.SKIPPED: 0, Verdict.PASS: 1, Verdict.WARN: 2, Verdict.FAIL: 3}


def worst(verdicts: list[Verdict]) -> Verdict:
    """The most serious verdict of several (skipped < pass < warn < fail)."""
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.SKIPPED)


@dataclass
class ProbeResult:
    """One probe's outcome.

    ``name`` is the probe's id (``overfit-batch``), ``tests`` says what it tests,
    ``summary`` is one line with the numbers that decided the verdict, ``evidence``
    holds the measurements (numbers, names of layers, parameters, batches) and
    ``lines`` the same as human-readable bullets.  When the verdict is not ``pass``,
    ``causes`` lists the likely causes and ``fix`` what to do; ``slugs`` are the
    catalog entries the probe relates to and ``findings`` the catalog failures it
    saw (:class:`~overt.findings.Finding`).  ``skipped`` results give ``reason``.
    ``curves`` keeps series for plots (e.g. the overfit loss curve).
    """

    name: str
    title: str
    tests: str
    verdict: Verdict = Verdict.PASS
    summary: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    fix: str = ""
    slugs: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    curves: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """No failure (a warning or a skip still passes)."""
        return self.verdict is not Verdict.FAIL

    def find(self, slug: str, message: str, where: str = "", severity: Severity | None = None, *, fix: str = "",
             why: str = "", **details: Any) -> Finding:
        """Record a catalog failure seen by this probe (and relate the probe to its slug).

        ``message`` says what was seen and why it matters; ``fix`` what to change: the finding's
        own field, and the message's last sentence (``... Fix: <fix>.``) as the note prints it;
        ``why`` replaces the catalog entry's reason when given."""
        text = f"{message} Fix: {fix}" if fix else message
        finding = Finding(slug, text, where=where, severity=severity, details=details, fix=fix, why=why)
        self.findings.append(finding)
        if slug not in self.slugs:
            self.slugs.append(slug)
        return finding

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "title": self.title, "tests": self.tests, "verdict": self.verdict.value,
            "summary": self.summary, "evidence": self.evidence, "lines": self.lines, "causes": self.causes,
            "fix": self.fix, "slugs": self.slugs, "findings": [f.to_dict() for f in self.findings],
            "reason": self.reason, "seconds": round(self.seconds, 3),
        }


def skipped(name: str, title: str, tests: str, reason: str) -> ProbeResult:
    """A probe that did not run, with the reason."""
    return ProbeResult(name, title, tests, verdict=Verdict.SKIPPED, summary=f"skipped: {reason}", reason=reason)


def combine(name: str, title: str, tests: str, parts: list[ProbeResult]) -> ProbeResult:
    """One result from several sub-checks (e.g. checkpoint round-trip + exact resume)."""
    out = ProbeResult(name, title, tests, verdict=worst([p.verdict for p in parts]))
    out.summary = "; ".join(p.summary for p in parts if p.summary)
    for p in parts:
        out.evidence[p.name] = p.evidence
        out.lines += p.lines
        out.causes += [c for c in p.causes if c not in out.causes]
        out.fix = " ".join(x for x in (out.fix, p.fix) if x)
        out.slugs += [s for s in p.slugs if s not in out.slugs]
        out.findings += p.findings
        out.curves.update(p.curves)
        out.seconds += p.seconds
    reasons = [p.reason for p in parts if p.reason]
    out.reason = "; ".join(reasons)
    return out


def number(value: Any) -> str:
    """``12,345`` for an int, else ``str(value)``."""
    return f"{value:,}" if isinstance(value, int) else str(value)


def duration(seconds: float) -> str:
    """``about 1.5 s``, ``about 12 min``, ``about 3.0 h``."""
    if seconds < 120:
        return f"about {seconds:.1f} s"
    if seconds < 7200:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
