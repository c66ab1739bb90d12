"""Which files lint reads: .py and .ipynb under the given paths, minus .gitignore'd
and excluded ones (explicitly named files, and directories the config excludes but the
command line names, are always read)."""

from __future__ import annotations

import os
from pathlib import Path

import pathspec

SUFFIXES = (".py", ".ipynb")
ALWAYS_SKIP = frozenset({".git", "__pycache__", ".ipynb_checkpoints", ".venv", "venv", ".tox", ".nox",
                         "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs"})


class _Ignores:
    """.gitignore files from the repository root down, plus config excludes."""

    def __init__(self, exclude: list[str], exclude_root: Path):
        self._specs: dict[Path, pathspec.PathSpec | None] = {}
        self._exclude = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None
        self._exclude_root = exclude_root.resolve()

    def _spec(self, directory: Path) -> pathspec.PathSpec | None:
        if directory not in self._specs:
            gi = directory / ".gitignore"
            spec = None
            if gi.is_file():
                try:
                    text = gi.read_text(encoding="utf-8", errors="replace")
                    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
                except (OSError, ValueError):
                    spec = None
            self._specs[directory] = spec
        return self._specs[directory]

    def excluded(self, path: Path) -> bool:
        """Whether the config's ``exclude`` patterns cover ``path`` (a directory)."""
        if self._exclude is None:
            return False
        try:
            rel = path.resolve().relative_to(self._exclude_root).as_posix()
        except ValueError:
            return False
        return self._exclude.match_file(rel + "/")

    def ignored(self, path: Path, is_dir: bool, use_exclude: bool = True) -> bool:
        path = path.resolve()
        suffix = "/" if is_dir else ""
        if use_exclude and self._exclude is not None:
            try:
                rel = path.relative_to(self._exclude_root).as_posix()
                if self._exclude.match_file(rel + suffix):
                    return True
            except ValueError:
                pass
        for d in path.parents:
            spec = self._spec(d)
            if spec is not None and spec.match_file(path.relative_to(d).as_posix() + suffix):
                return True
            if (d / ".git").exists():
                break
        return False


def discover(paths: list[Path], exclude: list[str], exclude_root: Path) -> tuple[list[Path], list[str]]:
    """Files to lint, in a stable order, and messages for paths that do not exist."""
    ignores = _Ignores(exclude, exclude_root)
    files: list[Path] = []
    missing: list[str] = []
    for p in paths:
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            # a directory named explicitly is linted even if the config excludes it
            use_exclude = not ignores.excluded(p)
            for root, dirs, names in os.walk(p):
                rp = Path(root)
                dirs[:] = sorted(d for d in dirs
                                 if d not in ALWAYS_SKIP and not ignores.ignored(rp / d, True, use_exclude))
                for name in sorted(names):
                    if name.endswith(SUFFIXES) and not ignores.ignored(rp / name, False, use_exclude):
                        files.append(rp / name)
        else:
            missing.append(f"{p}: no such file or directory")
    seen: set[Path] = set()
    out = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out, missing
