"""Options shared by the three ways into the guards (engine, ``overt.guard``, ``overt run``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from overt.catalog import lookup
from overt.errors import ConfigError


def normalize_ignore(items: Iterable[str]) -> frozenset[str]:
    """Turn slugs or codes (``"stale-gradients"``, ``"OVT101"``, comma lists) into a set of slugs."""
    slugs: set[str] = set()
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                slugs.add(lookup(part).slug)
            except KeyError as exc:
                raise ConfigError(
                    f"cannot ignore {part!r}: it is not a catalog slug or code",
                    why="a misspelt name would silently silence nothing",
                    fix=str(exc.args[0]),
                ) from None
    return frozenset(slugs)


def pyproject_ignore(start: str | Path = ".") -> list[str]:
    """``[tool.overt] ignore = [...]`` from the nearest ``pyproject.toml`` at or above ``start``."""
    from overt import pyproject
    from overt.errors import ConfigError

    path = pyproject.find(start)
    if path is None:
        return []
    try:
        value = pyproject.read(path).get("ignore", [])
    except ConfigError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


@dataclass
class GuardOptions:
    """How the guards behave.

    ``check_every``: after the first ``warmup_steps`` optimizer steps, the
    expensive checks run on one step in ``check_every`` (device values are read
    only then, so there is no host-device synchronisation on the other steps);
    long runs are checked more sparsely (:mod:`overt.guards.clock`).  Which steps
    are checked depends on the step count alone, never on measured times.
    ``overhead_budget`` is accepted and ignored (it used to stretch the interval
    by timing the checks at run time, which made findings depend on machine load).
    ``strict`` turns warnings into errors; ``ignore`` silences slugs (or codes);
    ``stop_on_error`` raises :class:`~overt.guards.report.GuardError` before an
    optimizer step that would corrupt the weights (stale or non-finite gradients).
    """

    strict: bool = False
    ignore: frozenset[str] = field(default_factory=frozenset)
    check_every: int = 50
    warmup_steps: int = 5
    stop_on_error: bool = True
    report_path: str | None = None
    overhead_budget: float | None = None  # ignored (see above)
    stream: object = None  # a text stream; None means sys.stderr at report time
    #: how this face's user silences a slug, for fixes: ``ignore=[{slug}]`` (a run's config key),
    #: ``ignore=['{slug}']`` (Python), ``--ignore {slug}`` (``overt run``)
    silence_with: str = "ignore=[{slug}]"

    def __post_init__(self) -> None:
        self.ignore = normalize_ignore(self.ignore)
        if self.overhead_budget is not None:
            import warnings

            warnings.warn("overt guards: overhead_budget is ignored: which steps are checked depends on the step "
                          "count alone (check_every), so findings do not depend on machine load",
                          DeprecationWarning, stacklevel=3)
        if int(self.check_every) < 1:
            raise ConfigError(f"check_every must be >= 1, got {self.check_every}", fix="use e.g. check_every=50")
        if int(self.warmup_steps) < 1:
            raise ConfigError(f"warmup_steps must be >= 1, got {self.warmup_steps}", fix="use e.g. warmup_steps=5")
        self.check_every = int(self.check_every)
        self.warmup_steps = int(self.warmup_steps)

    def silence(self, slug: str) -> str:
        """How to silence ``slug`` in this face's own terms."""
        return self.silence_with.format(slug=slug)

    def out(self):
        return self.stream if self.stream is not None else sys.stderr
