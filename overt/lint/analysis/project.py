"""The project index: the other modules of the package being linted, parsed once per run.

A rule that meets ``from .models import Net`` asks the project for ``models``; the
project finds the file next to the importing one (relative imports, sibling
scripts, packages up to the first directory without ``__init__.py``), parses it
once and keeps its :class:`~overt.lint.index.FileIndex` for the rest of the run
(when that module's own turn to be linted comes, the same index is used).  Only
imported modules are kept, at most ``MAX_MODULES`` of them, so memory and time stay
bounded on any tree: past that, imports are not followed and the rules that
would need them stay silent.
"""

from __future__ import annotations

import ast
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overt.lint.index import FileIndex

MAX_MODULES = 128


class Project:
    """The imported modules of the project, parsed on demand, by path."""

    def __init__(self, root: Path | None = None) -> None:
        #: the tree being linted (the configuration's root), or None when not known
        self.root = root
        self._files: dict[Path, FileIndex | None] = {}
        self._paths: dict[tuple, Path | None] = {}
        self._extra = 0

    def known(self, path: Path, source: str) -> "FileIndex | None":
        """The index already built for ``path`` when its source is unchanged (a module parsed
        for an import earlier in the run is not parsed again when its turn to be linted comes)."""
        ix = self._files.get(path) or self._files.get(path.resolve())
        if ix is not None and ix.source_lines == source.splitlines():
            return ix
        return None

    def index_for(self, path: Path) -> "FileIndex | None":
        if path in self._files:
            return self._files[path]
        key = path.resolve()
        if key in self._files:
            return self._files[key]
        ix = None
        if self._extra < MAX_MODULES:
            self._extra += 1
            ix = _parse(key, self)
        self._files[key] = ix
        return ix

    def module(self, ix: "FileIndex", module: str | None, level: int) -> "FileIndex | None":
        """The file that ``from <level dots><module> import ...`` in ``ix`` refers to, if it is in the project."""
        found = self.module_path(ix, module, level)
        return self.index_for(found) if found is not None else None

    def module_path(self, ix: "FileIndex", module: str | None, level: int) -> Path | None:
        """The path of that module's file, without parsing it (None outside the project)."""
        if ix.path is None:
            return None
        here = ix.cache.get("dir")
        if here is None:
            here = ix.cache["dir"] = Path(os.path.abspath(ix.path.parent))
        key = (here, module, level)
        if key not in self._paths:
            self._paths[key] = _find(here, module, level)
        return self._paths[key]

    def imports_project(self, ix: "FileIndex") -> bool:
        """Does ``ix`` import anything from another module of the project?"""
        found = ix.cache.get("imports_project")
        if found is None:
            found = ix.cache["imports_project"] = any(
                level > 0 or self.module_path(ix, module, 0) is not None
                for module, level, _ in ix.imports.values())
        return found


def _find(here: Path, module: str | None, level: int) -> Path | None:
    parts = module.split(".") if module else []
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
                return cand
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
