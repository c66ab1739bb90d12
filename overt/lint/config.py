"""Lint settings from ``[tool.overt]`` in pyproject.toml and from the command line.

Keys (all optional; values are slugs, codes are accepted too)::

    [tool.overt]
    select = ["stale-gradients", "OVT201"]   # only these rules (default: every static rule)
    ignore = ["data-attribute"]              # never these (runtime guards read this key too)
    exclude = ["legacy/", "*_generated.py"]  # gitignore-style, relative to pyproject.toml
    min-severity = "warning"                 # lowest level shown: info | warning (default) | error
    [tool.overt.per-file-ignores]
    "tests/*" = ["unsafe-load"]
    [tool.overt.severity]                    # a rule's level: error | warning | info | off
    dataparallel = "warning"
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from overt.catalog import ENTRIES, Severity, lookup
from overt import pyproject
from overt.errors import ConfigError
from overt.findings import Finding
from overt.lint.severity import ORDER, level_of, shown

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
    severity: dict[str, str] = field(default_factory=dict)  # slug -> error | warning | info | off
    min_severity: str = "warning"

    def present(self, findings: list[Finding]) -> list[Finding]:
        """``findings`` at the project's levels, without those below ``min_severity`` or switched off."""
        out = []
        for f in findings:
            level = level_of(f.slug, Severity(f.severity).value, self.severity)
            if level is None or not shown(level, self.min_severity):
                continue
            f.severity = Severity(level)
            out.append(f)
        return out

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
    if "min-severity" in section:
        cfg.min_severity = check_level(section["min-severity"], f"min-severity of {where}", allow_off=False)
    levels = section.get("severity", {})
    if not isinstance(levels, dict):
        raise ConfigError(f"severity of {where} must be a table of rule = \"error\" | \"warning\" | \"info\" | \"off\"")
    for key, value in levels.items():
        for slug in resolve([key], f"severity of {where}"):
            cfg.severity[slug] = check_level(value, f"severity[{key!r}] of {where}", allow_off=True)
    return cfg


def check_level(value: object, where: str, allow_off: bool) -> str:
    """A severity name, or a ConfigError naming the bad value."""
    allowed = [*ORDER, "off"] if allow_off else list(ORDER)
    if not isinstance(value, str) or value.lower() not in allowed:
        raise ConfigError(f"{where} must be one of {', '.join(allowed)}, got {value!r}",
                          fix='write e.g. "warning"')
    return value.lower()
