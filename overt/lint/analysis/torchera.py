"""Is a project without a torch floor written for torch before 0.4?  Read from its own code.

``Variable(x, volatile=True)`` switched autograd off up to torch 0.3 and is ignored from 0.4 on, so
whether an evaluation wrapped in it builds a graph depends on the torch the project runs on.  A project
that names no torch version in its packaging files can still say it by its code: idioms that only work
before 0.4 (``.cuda(async=True)``, a keyword torch 0.4 renamed ``non_blocking`` and Python 3.7 no longer
parses; ``loss.data[0]``, indexing the zero-dimensional loss torch 0.4 introduced) with none of the API
0.4 brought (``.item()``, ``torch.no_grad``, ``torch.device``, ``non_blocking=``, ``reduction=`` ...).
The Python files of the linted file's folder are read as text (a file that no longer parses counts too);
any sign of torch >= 0.4 there, or no sign of the old torch, leaves the answer False.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

#: written for torch <= 0.3: an async= keyword to .cuda() / .to(), a loss read as loss.data[0]
_OLD = re.compile(r"\.cuda\([^)\n]*\basync\s*=|\bloss\w*\.data\[0\]")
#: the API torch 0.4 and later brought
_NEW = re.compile(r"\.item\(\)|\bno_grad\b|\btorch\.device\(|\bnon_blocking\s*=|\bset_grad_enabled\b"
                  r"|\binference_mode\b|\breduction\s*=|\btorch\.tensor\(")
_MAX_FILES = 200
_MAX_CHARS = 400_000


@lru_cache(maxsize=256)
def _folder_era(folder: Path) -> bool:
    """Do the Python files of ``folder`` use a torch-0.3 idiom and nothing of torch 0.4's API?"""
    old = False
    try:
        paths = sorted(folder.glob("*.py"))[:_MAX_FILES]
    except OSError:
        return False
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:_MAX_CHARS]
        except OSError:
            continue
        if _NEW.search(text):
            return False
        old = old or _OLD.search(text) is not None
    return old


def written_for_torch_before_04(path: Path | None) -> bool:
    """Is the file at ``path`` part of code written for torch before 0.4 (see the module's docstring)?
    False for source without a file."""
    if path is None:
        return False
    try:
        return _folder_era(path.resolve().parent)
    except OSError:
        return False
