"""A project's own overt settings: the ``[tool.overt]`` table of its pyproject.toml.

Lint reads ``select``/``ignore``/``per-file-ignores``/``exclude`` from it; the
runtime guards (``overt run`` and the engine) read ``ignore``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from overt.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def find(start: str | Path = ".") -> Path | None:
    """The nearest pyproject.toml with a ``[tool.overt]`` table, from ``start`` (a file or folder) upwards."""
    cur = Path(start).resolve()
    if cur.is_file():
        cur = cur.parent
    for folder in (cur, *cur.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if "overt" in data.get("tool", {}):
                return candidate
    return None


def read(path: Path) -> dict[str, Any]:
    """The ``[tool.overt]`` table of ``path``; a clear error for an unreadable or invalid file."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", fix="pass an existing pyproject.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", fix="fix the syntax error it names") from None
    section = data.get("tool", {}).get("overt", {})
    if not isinstance(section, dict):
        raise ConfigError(f"[tool.overt] in {path} must be a table", fix="write it as a [tool.overt] section")
    return section
