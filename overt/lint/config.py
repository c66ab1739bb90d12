"""Lint settings from ``[tool.overt]`` in pyproject.toml and from the command line.

Keys (all optional; values are slugs, codes are accepted too)::

    [tool.overt]
    select = ["stale-gradients", "OVT201"]   # only these rules (default: every static rule)
    ignore = ["data-attribute"]              # never these (runtime guards read this key too)
    exclude = ["legacy/", "*_generated.py"]  # gitignore-style, relative to pyproject.toml
    [tool.overt.per-file-ignores]
    "tests/*" = ["unsafe-load"]
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from overt.catalog import ENTRIES, lookup
from overt import pyproject
from overt.errors import ConfigError

STATIC_SLUGS: tuple[str, ...] = tuple(e.slug for e in ENTRIES if e.static)


def resolve(values: object, where: str) -> set[str]:
    """Slugs for a list of slugs/codes; ConfigError naming the bad value otherwise."""
    if isinstance(values, str):
        values = [v for v in values.replace(" ", ",").split(",") if v]
    if not isinstance(values, (list, tuple)):
        raise ConfigError(f"{where} must be a list of rule slugs or codes, got {values!r}",
                          fix='write e.g. ["stale-gradients", "OVT201"]')
    out = set()
    for v in values:
        if str(v).upper() in ("ALL", "OVT"):
            out.update(STATIC_SLUGS)
            continue
        try:
            out.add(lookup(str(v)).slug)
        except KeyError as exc:
            raise ConfigError(f"unknown rule {v!r} in {where}", why=str(exc.args[0]),
                              fix="use a slug or code from `overt lint --list-rules`") from None
    return out


@dataclass
class LintConfig:
    """Which rules run where."""

    select: set[str] = field(default_factory=lambda: set(STATIC_SLUGS))
    ignore: set[str] = field(default_factory=set)
    per_file_ignores: list[tuple[str, set[str]]] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None

    def rules_for(self, path: Path) -> set[str]:
        """The slugs that run on ``path``."""
        active = (self.select & set(STATIC_SLUGS)) - self.ignore
        if self.per_file_ignores:
            try:
                rel = path.resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                rel = path.as_posix()
            for pattern, slugs in self.per_file_ignores:
                if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
                    active -= slugs
        return active


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.overt] table, from ``start`` upwards."""
    return pyproject.find(start)


def load_config(path: Path | None) -> LintConfig:
    """Read ``[tool.overt]`` from ``path`` (a pyproject.toml); defaults when None."""
    if path is None:
        return LintConfig()
    section = pyproject.read(path)
    cfg = LintConfig(root=path.parent, source=path)
    where = f"[tool.overt] in {path}"
    if "select" in section:
        cfg.select = resolve(section["select"], f"select of {where}")
    if "ignore" in section:
        cfg.ignore = resolve(section["ignore"], f"ignore of {where}")
    pfi = section.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"per-file-ignores of {where} must be a table of glob = [slugs]")
    cfg.per_file_ignores = [(str(k), resolve(v, f"per-file-ignores[{k!r}] of {where}")) for k, v in pfi.items()]
    excl = section.get("exclude", [])
    if not isinstance(excl, list) or not all(isinstance(e, str) for e in excl):
        raise ConfigError(f"exclude of {where} must be a list of patterns")
    cfg.exclude = list(excl)
    return cfg
