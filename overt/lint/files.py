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
        self._chains: dict[Path, list[tuple[Path, pathspec.PathSpec]]] = {}
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

    def ignored(self, path: Path, is_dir: bool, use_exclude: bool = True, resolved: bool = False) -> bool:
        return self.reason(path, is_dir, use_exclude, resolved) is not None

    def _chain(self, directory: Path) -> list[tuple[Path, pathspec.PathSpec]]:
        """The .gitignore specs that apply below ``directory``: its own and its parents', up to
        the repository root (cached per directory)."""
        found = self._chains.get(directory)
        if found is None:
            own = self._spec(directory)
            found = [(directory, own)] if own is not None else []
            if not (directory / ".git").exists() and directory.parent != directory:
                found = found + self._chain(directory.parent)
            self._chains[directory] = found
        return found

    def reason(self, path: Path, is_dir: bool, use_exclude: bool = True, resolved: bool = False) -> str | None:
        """Why ``path`` is skipped (the config's exclude, or the .gitignore that matches it), or None."""
        if not resolved:
            path = path.resolve()
        suffix = "/" if is_dir else ""
        if use_exclude and self._exclude is not None:
            try:
                rel = path.relative_to(self._exclude_root).as_posix()
                if self._exclude.match_file(rel + suffix):
                    return "excluded by `exclude` in [tool.overt]"
            except ValueError:
                pass
        text = path.as_posix()
        for d, spec in self._chain(path.parent):
            base = d.as_posix().rstrip("/") + "/"
            if spec.match_file(text[len(base):] + suffix):
                return f"git-ignored by {d / '.gitignore'}"
        return None


def _walk(p: Path, ignores: _Ignores | None, use_exclude: bool) -> list[Path]:
    found = []
    real = p.resolve()  # resolved once; the walk's own paths are kept as given
    for root, dirs, names in os.walk(p):
        rp = Path(root)
        rel = os.path.relpath(root, p)
        rr = real if rel == "." else real / rel
        dirs[:] = sorted(d for d in dirs if d not in ALWAYS_SKIP
                         and not (ignores and ignores.ignored(rr / d, True, use_exclude, resolved=True)))
        for name in sorted(names):
            if name.endswith(SUFFIXES) and not (
                    ignores and ignores.ignored(rr / name, False, use_exclude, resolved=True)):
                found.append(rp / name)
    return found


def skipped_note(directory: Path, exclude: list[str], exclude_root: Path) -> str | None:
    """For a directory that gave no file to lint: how many .py/.ipynb files it holds that
    were skipped, why, and how to include them (None when it holds none)."""
    ignores = _Ignores(exclude, exclude_root)
    use_exclude = not ignores.excluded(directory)
    every = _walk(directory, None, use_exclude)
    if not every:
        return None
    reasons: dict[str, int] = {}
    for f in every:
        why = None
        for part in [*reversed(f.relative_to(directory).parents[:-1]), None]:
            target = directory / part if part is not None else f
            why = ignores.reason(target, part is not None, use_exclude)
            if why:
                break
        if why is None:
            why = ignores.reason(directory, True, use_exclude)
        reasons[why or "skipped"] = reasons.get(why or "skipped", 0) + 1
    what = "; ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    n = len(every)
    return (f"{directory}: {n} Python file{'s' if n != 1 else ''} skipped ({what}); pass --no-ignore to "
            f"lint them anyway, or name the files")


def discover(paths: list[Path], exclude: list[str], exclude_root: Path,
             respect_ignores: bool = True) -> tuple[list[Path], list[str]]:
    """Files to lint, in a stable order, and messages for paths that do not exist.
    ``respect_ignores=False`` reads git-ignored and config-excluded files too."""
    ignores = _Ignores(exclude, exclude_root) if respect_ignores else None
    files: list[Path] = []
    missing: list[str] = []
    for p in paths:
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            # a directory named explicitly is linted even if the config excludes it
            use_exclude = ignores is not None and not ignores.excluded(p)
            files.extend(_walk(p, ignores, use_exclude))
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
