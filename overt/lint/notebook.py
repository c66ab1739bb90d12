"""Jupyter notebooks: the code cells as one Python module, with a map back to cells."""

from __future__ import annotations

import json
from dataclasses import dataclass

_PY_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun")


@dataclass
class NotebookSource:
    """The notebook's code as one module; ``where[k]`` = (cell number, line in cell)
    for line k+1 of ``source``. Cells are numbered 1, 2, ... in notebook order
    counting code cells only."""

    source: str
    where: list[tuple[int, int]]

    def locate(self, line: int) -> tuple[int, int]:
        if 1 <= line <= len(self.where):
            return self.where[line - 1]
        return (0, line)

    def without_cell(self, cell: int) -> "NotebookSource":
        """The same notebook with code cell ``cell`` blanked (its lines kept empty, so lines still map)."""
        lines = self.source.split("\n")
        for k, (c, _) in enumerate(self.where):
            if c == cell and k < len(lines):
                lines[k] = ""
        return NotebookSource("\n".join(lines), self.where)


def _is_shell(stripped: str) -> bool:
    """A shell (``!pip install x``) or magic (``%matplotlib inline``) line, or ``files = !ls``."""
    if stripped.startswith(("%", "!")) or (stripped.endswith("?") and not stripped.startswith("#")):
        return True
    head, eq, rest = stripped.partition("=")
    return bool(eq) and head.strip().isidentifier() and rest.lstrip().startswith(("!", "%")) \
        and not rest.lstrip().startswith(("!=", "%="))


def _clean_cell(cell_lines: list[str]) -> list[str]:
    """Each shell or magic line becomes ``pass``; a shell line that ends in a backslash goes on to the
    next line, which is shell too (``!pip install a \\`` / ``    b``), and so on."""
    out, continued = [], False
    for line in cell_lines:
        stripped = line.lstrip()
        if continued or _is_shell(stripped):
            indent = "" if continued else line[: len(line) - len(stripped)]
            out.append(indent + "pass  # shell or magic line" if not continued else "")
            continued = line.rstrip().endswith("\\")
        else:
            out.append(line)
    return out


def read_notebook(text: str) -> NotebookSource:
    """Parse .ipynb JSON; raise ValueError with a readable reason when it is not a notebook."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid notebook JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ValueError("not a Jupyter notebook (no 'cells' list)")
    lines: list[str] = []
    where: list[tuple[int, int]] = []
    number = 0
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        src = cell.get("source", "")
        text_cell = "".join(src) if isinstance(src, list) else str(src)
        cell_lines = text_cell.splitlines()
        first = cell_lines[0].lstrip() if cell_lines else ""
        skip = first.startswith("%%") and not first.startswith(_PY_CELL_MAGICS)
        for k, line in enumerate(_clean_cell(cell_lines), start=1):
            lines.append("" if skip else line)
            where.append((number, k))
    return NotebookSource("\n".join(lines) + "\n", where)
