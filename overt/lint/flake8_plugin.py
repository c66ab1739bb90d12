"""flake8 plugin: ``flake8 --select OVT`` runs overt's lint rules.

Declared in pyproject.toml as the ``flake8.extension`` entry point
``OVT = overt.lint.flake8_plugin:Plugin``, so it is active once overt is
installed (``pip install overt``).  flake8 handles ``# noqa: OVT101``; the
plugin also honours ``# overt: ignore[slug]``.  Notebooks are not flake8's
business: use ``overt lint`` for them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from overt import __version__


class Plugin:
    """A flake8 AST plugin (flake8 passes ``tree``, ``filename`` and ``lines``)."""

    name = "overt"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str = "<stdin>", lines: list[str] | None = None):
        self.tree = tree
        self.filename = filename
        self.lines = lines

    def _source(self) -> str:
        if self.lines is not None:
            return "".join(self.lines)
        try:
            with open(self.filename, encoding="utf-8") as fh:
                return fh.read()
        except OSError:
            return ast.unparse(self.tree)

    def run(self) -> Iterator[tuple[int, int, str, type[Any]]]:
        """Yield ``(line, col, "OVTnnn slug message", type)``; col is 0-based for flake8."""
        from overt.catalog import lookup
        from overt.lint.engine import lint_source

        try:
            hits = lint_source(self._source(), self.filename)
        except SyntaxError:
            return  # flake8 reports E999 itself
        for hit in hits:
            yield hit.line, hit.col - 1, f"{lookup(hit.slug).code} {hit.slug} {hit.text}", type(self)
