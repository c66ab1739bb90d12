"""Collect findings: once per cause, silenced slugs dropped, ``--strict`` applied,
printed to stderr as they are found, and written as JSON at the end."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from overt.catalog import Severity, lookup
from overt.errors import OvertError
from overt.findings import Finding
from overt.guards.options import GuardOptions

PREFIX = "overt guard: "


class GuardError(OvertError):
    """Raised before an optimizer step that would corrupt the weights
    (stale or non-finite gradients).  ``finding`` is the cause."""

    def __init__(self, finding: Finding, silence: str | None = None):
        self.finding = finding
        entry = lookup(finding.slug)
        silence = silence or f"ignore=['{finding.slug}']"
        super().__init__(
            f"{finding.code} {finding.slug}: stopped before the optimizer step. {finding.message}",
            where=finding.where + (f" (step {finding.step})" if finding.step is not None else ""),
            why=entry.why,
            fix=f"see docs/guards.md#{finding.slug}; silence with {silence} only if this is intended",
        )


class Reporter:
    """Findings of one guarded run."""

    def __init__(self, options: GuardOptions):
        self.options = options
        self.findings: list[Finding] = []
        self._keys: set[tuple[str, str]] = set()
        self._failed: set[str] = set()  # the guards whose own failure was reported
        self.notes: list[str] = []  # info lines said instead of findings (:meth:`note`)
        self._noted: set[str] = set()
        self._pid = os.getpid()

    def has(self, slug: str, key: str = "") -> bool:
        return (slug, key) in self._keys

    def add(self, finding: Finding, key: str = "") -> Finding | None:
        """Record ``finding`` unless its slug is silenced or its cause (slug, key) was already
        reported.  Returns the recorded finding (None when dropped)."""
        if os.getpid() != self._pid:  # a DataLoader worker: only the main process reports
            return None
        if finding.slug in self.options.ignore:
            return None
        cause = (finding.slug, key)
        if cause in self._keys:
            return None
        self._keys.add(cause)
        if self.options.strict and finding.severity != Severity.ERROR:
            finding.severity = Severity.ERROR
        self.findings.append(finding)
        try:
            print(PREFIX + finding.format(), file=self.options.out(), flush=True)
        except (OSError, ValueError):  # closed stream: keep the finding anyway
            pass
        return finding

    def note(self, slug: str, key: str, text: str) -> None:
        """An info line instead of a finding (once per ``key``; not printed when ``slug`` is
        silenced, nor under ``OVERT_BUSY_NOTE=0``, the test suite's setting): what a check saw
        but could not blame on the program, e.g. a wait caused by a busy machine.  Kept in
        :attr:`notes`; exit codes and reports do not change."""
        if os.getpid() != self._pid or slug in self.options.ignore or key in self._noted:
            return
        self._noted.add(key)
        self.notes.append(text)
        if os.environ.get("OVERT_BUSY_NOTE", "1") == "0":
            return
        try:
            print(f"overt: info: {text}", file=self.options.out(), flush=True)
        except (OSError, ValueError):  # closed stream
            pass

    def internal_error(self, name: str, exc: BaseException) -> None:
        """Say once per guard ``name`` that it failed (it is skipped; training goes on)."""
        if name in self._failed or os.getpid() != self._pid:
            return
        self._failed.add(name)
        try:
            print(f"{PREFIX}internal error in {name} ({type(exc).__name__}: {exc}); the guards skip it and "
                  "training continues. Please report it.", file=self.options.out(), flush=True)
        except (OSError, ValueError):  # closed stream
            pass

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    def summary_line(self) -> str:
        n = len(self.findings)
        if not n:
            return PREFIX + "no findings."
        e = len(self.errors())
        return PREFIX + f"{n} finding{'s' if n != 1 else ''} ({e} error{'s' if e != 1 else ''}); " \
            "see docs/guards.md for each slug's fix."

    def to_json(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings]}

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write ``{"findings": [...]}`` to ``path`` (parents created), atomically and as strict JSON: a
        full disk leaves the previous file or none, never half of one."""
        from overt.run.layout import write_json

        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json(target, self.to_json(), default=None)
