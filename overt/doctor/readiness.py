"""The doctor's answer: every probe's result, the verdict, and the files it writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overt.doctor.result import ProbeResult, Verdict
from overt.findings import Finding

NOTE, JSON = "readiness.md", "readiness.json"


@dataclass
class Readiness:
    """What ``overt.doctor(...)`` found.

    ``probes`` in the order they ran; ``passed`` is True when no probe failed; ``verdicts`` maps
    probe ids to verdicts; ``findings`` are the catalog failures seen; :meth:`to_markdown` is the
    readiness note, :meth:`to_json` the same as data, :meth:`write` puts both (and the plots)
    into a directory.  ``readiness["overfit-batch"]`` is one probe's result.
    """

    probes: list[ProbeResult]
    setup: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    plots: dict[str, str] = field(default_factory=dict)
    plots_skipped: str | None = None
    directory: Path | None = None

    def __getitem__(self, name: str) -> ProbeResult:
        for p in self.probes:
            if p.name == name:
                return p
        raise KeyError(f"no probe {name!r} ran; these did: {', '.join(p.name for p in self.probes)}")

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.probes)

    @property
    def passed(self) -> bool:
        return all(p.verdict is not Verdict.FAIL for p in self.probes)

    @property
    def verdicts(self) -> dict[str, str]:
        return {p.name: p.verdict.value for p in self.probes}

    @property
    def findings(self) -> list[Finding]:
        return [f for p in self.probes for f in p.findings]

    def count(self, verdict: Verdict) -> int:
        return sum(p.verdict is verdict for p in self.probes)

    @property
    def verdict(self) -> str:
        """``ready``, ``ready with warnings`` or ``not ready``."""
        if not self.passed:
            return "not ready"
        return "ready with warnings" if self.count(Verdict.WARN) else "ready"

    def exit_code(self, strict: bool = False) -> int:
        """0 when nothing failed (and, with ``strict``, nothing warned); else 1."""
        if not self.passed or (strict and self.count(Verdict.WARN)):
            return 1
        return 0

    def to_markdown(self) -> str:
        """The readiness note."""
        from overt.doctor.note import render

        return render(self)

    def to_dict(self) -> dict[str, Any]:
        from overt import __version__

        return {"verdict": self.verdict, "passed": self.passed, "created": self.created, "overt": __version__,
                "setup": self.setup, "verdicts": self.verdicts, "probes": [p.to_dict() for p in self.probes],
                "findings": [f.to_dict() for f in self.findings], "plots": self.plots,
                "plots_skipped": self.plots_skipped}

    def to_json(self) -> str:
        from overt.run.layout import dumps_json

        return dumps_json(self.to_dict(), default=_jsonable)

    def write(self, directory: str | Path) -> Path:
        """Write the plots, ``readiness.md`` and ``readiness.json`` into ``directory``; returns the note's path."""
        from overt.doctor.plots import write_plots
        from overt.run.atomic import write_text_atomic

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.plots, self.plots_skipped = write_plots(self, directory)
        write_text_atomic(directory / JSON, self.to_json())
        write_text_atomic(directory / NOTE, self.to_markdown())
        return directory / NOTE


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)
