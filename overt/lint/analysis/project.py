"""The project index: the other modules of the package being linted, parsed once per run.

A rule that meets ``from .models import Net`` asks the project for ``models``; the
project finds the file next to the importing one (relative imports, sibling
scripts, packages up to the first directory without ``__init__.py``), parses it
once and keeps its :class:`~overt.lint.index.FileIndex`.  Files that are linted in
the same run are registered as they are parsed, so nothing is read twice; files
reached only through imports are parsed on demand, at most ``MAX_EXTRA`` of them
per run, which bounds the cost on any tree.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overt.lint.index import FileIndex

MAX_EXTRA = 200


class Project:
    """Parsed modules by path, filled by the linter and on demand."""

    def __init__(self) -> None:
        self._files: dict[Path, FileIndex | None] = {}
        self._extra = 0

    def register(self, path: Path, ix: "FileIndex") -> None:
        self._files[path.resolve()] = ix

    def known(self, path: Path, source: str) -> "FileIndex | None":
        """The index already built for ``path`` when its source is unchanged (a module parsed
        for an import earlier in the run is not parsed again when its turn to be linted comes)."""
        ix = self._files.get(path.resolve())
        if ix is not None and ix.source_lines == source.splitlines():
            return ix
        return None

    def index_for(self, path: Path) -> "FileIndex | None":
        key = path.resolve()
        if key in self._files:
            return self._files[key]
        ix = None
        if self._extra < MAX_EXTRA:
            self._extra += 1
            ix = _parse(key, self)
        self._files[key] = ix
        return ix

    def module(self, ix: "FileIndex", module: str | None, level: int) -> "FileIndex | None":
        """The file that ``from <level dots><module> import ...`` in ``ix`` refers to, if it is in the project."""
        if ix.path is None:
            return None
        parts = module.split(".") if module else []
        here = ix.path.resolve().parent
        if level > 0:
            base = here
            for _ in range(level - 1):
                base = base.parent
            roots = [base]
        else:
            roots = [here]
            d = here
            while (d / "__init__.py").is_file() and d.parent != d:
                d = d.parent
                roots.append(d)
        for root in roots:
            target = root.joinpath(*parts) if parts else root
            for cand in (target.with_suffix(".py") if parts else None, target / "__init__.py"):
                if cand is not None and cand.is_file():
                    return self.index_for(cand)
        return None


def _parse(path: Path, project: Project) -> "FileIndex | None":
    from overt.lint.engine import read_source
    from overt.lint.index import FileIndex

    try:
        text = read_source(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None
    return FileIndex.build(tree, text, path=path, project=project)
