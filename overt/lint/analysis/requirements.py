"""The oldest torch a project says it runs on, read from its packaging files.

Lint needs it for ``torch.load``: from torch 2.6 on, ``weights_only=True`` is the default, so a
load without the argument in a project that requires torch >= 2.6 is already safe.  The files
read, nearest first from the linted file's folder up to the repository root (a folder holding
``.git``): ``pyproject.toml``, ``setup.cfg``, ``setup.py`` and ``requirements*.txt``.  The first
folder whose files name torch with a lower bound (``torch>=2.6``, ``torch==2.7.1``,
``torch~=2.6``) decides; none found means unknown.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_SPEC = re.compile(r"""(?<![\w.-])torch\s*(?:\[[^\]]*\])?\s*(>=|==|~=|>|===)\s*v?(\d+)\.(\d+)""")
_FILES = ("pyproject.toml", "setup.cfg", "setup.py")


def _floor_in(text: str) -> tuple[int, int] | None:
    floors = [(int(m.group(2)), int(m.group(3))) for m in _SPEC.finditer(text)]
    return min(floors) if floors else None


@lru_cache(maxsize=1024)
def _folder_floor(folder: Path) -> tuple[bool, tuple[int, int] | None]:
    """(does this folder name torch in its packaging files, the floor it gives)."""
    names = list(_FILES)
    try:
        names += sorted(p.name for p in folder.glob("requirements*.txt"))
    except OSError:
        return False, None
    floors = []
    mentioned = False
    for name in names:
        path = folder / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if re.search(r"(?<![\w.-])torch(?![\w.-])", text) is None:
            continue
        floor = _floor_in(text)
        if floor is not None:
            mentioned = True
            floors.append(floor)
    return mentioned, (min(floors) if floors else None)


@lru_cache(maxsize=4096)
def torch_floor(folder: Path) -> tuple[int, int] | None:
    """The lowest torch version the project around ``folder`` allows, or None when it is not said."""
    for cur in (folder, *folder.parents):
        mentioned, floor = _folder_floor(cur)
        if mentioned:
            return floor
        if (cur / ".git").exists():
            return None
    return None


def torch_floor_of(path: Path | None) -> tuple[int, int] | None:
    """:func:`torch_floor` for the folder of a linted file (None for source without a file)."""
    if path is None:
        return None
    try:
        return torch_floor(path.resolve().parent)
    except OSError:
        return None
