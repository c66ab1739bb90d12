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


def _clean(line: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith(("%", "!")) or (stripped.endswith("?") and not stripped.startswith("#")):
        return line[: len(line) - len(stripped)] + "pass  # shell or magic line"
    return line


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
        for k, line in enumerate(cell_lines, start=1):
            lines.append("" if skip else _clean(line))
            where.append((number, k))
    return NotebookSource("\n".join(lines) + "\n", where)
