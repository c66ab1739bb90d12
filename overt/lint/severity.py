"""How much a lint finding matters, and which levels a run shows.

- ``error``: the program is wrong (it trains on stale gradients, evaluates in training mode, ...).
- ``warning``: a real risk (a checkpoint that runs code when loaded, a loader that never shuffles).
- ``info``: style and hygiene (``nn.DataParallel``, a shuffled evaluation loader, ``.data`` outside a
  training step); not shown unless asked for (``--min-severity info`` or ``min-severity = "info"``).

A rule's level is the catalog entry's, except where lint sees less than a guard does (below); one
hit can lower its own level (``Hit.severity``) when what it saw is only hygiene.  A project sets
levels per rule in pyproject.toml::

    [tool.overt]
    min-severity = "info"            # show info findings too (default "warning")
    [tool.overt.severity]
    dataparallel = "warning"         # raise a rule
    unsafe-load = "off"              # or switch it off
"""

from __future__ import annotations

from overt.catalog import ENTRIES, Severity

ORDER = {"info": 0, "warning": 1, "error": 2}

#: lint's own level where it differs from the catalog's (the catalog's serves the runtime guards)
_LINT_LEVELS = {
    "unsafe-load": Severity.WARNING,  # a risk (code in a file from elsewhere), not a wrong program
    "dataparallel": Severity.INFO,    # works; slower than DDP
    "shuffled-evaluation": Severity.INFO,
}

DEFAULT_LEVELS: dict[str, Severity] = {e.slug: _LINT_LEVELS.get(e.slug, e.severity) for e in ENTRIES if e.static}


def level_of(slug: str, hit_level: str | None = None, overrides: dict[str, str] | None = None) -> str | None:
    """The level a finding of ``slug`` is shown at: the project's setting for the rule, else the
    hit's own, else the rule's default.  None when the project switched the rule off."""
    if overrides and slug in overrides:
        value = overrides[slug]
        return None if value == "off" else value
    if hit_level is not None:
        return hit_level
    return DEFAULT_LEVELS.get(slug, Severity.WARNING).value


def shown(level: str, min_level: str) -> bool:
    return ORDER[level] >= ORDER[min_level]
