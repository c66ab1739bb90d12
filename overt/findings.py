"""A finding: one silent failure made loud, from a runtime guard or from lint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from overt.catalog import Severity, lookup


@dataclass
class Finding:
    """One reported failure, in the catalog's terms.

    ``message`` says what was seen (with numbers), why it matters and the fix.
    ``where`` is a human-readable location (module, parameter, batch, file:line).
    Static findings also fill ``path``/``line``/``col``; runtime ones ``step``.
    ``why`` (why it matters) and ``fix`` (what to change) are the same parts on their own, as in
    :class:`~overt.errors.OvertError`, given by the reporter as fields (guards, lint rules, doctor
    probes and the predictor all do); ``why`` defaults to the catalog entry's.
    """

    slug: str
    message: str
    where: str = ""
    severity: Severity | None = None
    step: int | None = None
    path: str | None = None
    line: int | None = None
    col: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    fix: str = ""

    def __post_init__(self) -> None:
        entry = lookup(self.slug)  # fail early on a slug that is not in the catalog
        if self.severity is None:
            self.severity = entry.severity
        if not self.why:
            self.why = entry.why

    @property
    def code(self) -> str:
        return lookup(self.slug).code

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "slug": self.slug,
            "code": self.code,
            "severity": Severity(self.severity).value,
            "message": self.message,
            "where": self.where,
            "step": self.step,
            "why": self.why,
            "fix": self.fix,
        }
        for key in ("path", "line", "col"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.details:
            out["details"] = self.details
        return out

    def format(self) -> str:
        """One human-readable block: ``CODE slug [severity] where: message``."""
        loc = f" {self.where}" if self.where else ""
        step = f" (step {self.step})" if self.step is not None else ""
        return f"{self.code} {self.slug} [{Severity(self.severity).value}]{loc}{step}: {self.message}"
