"""Is a project without a torch floor written for torch before 0.4?  Read from its own code.

``Variable(x, volatile=True)`` switched autograd off up to torch 0.3 and is ignored from 0.4 on, so
whether an evaluation wrapped in it builds a graph depends on the torch the project runs on.  A project
that names no torch version in its packaging files can still say it by its code: idioms that only work
before 0.4 (``.cuda(async=True)``, a keyword torch 0.4 renamed ``non_blocking`` and Python 3.7 no longer
parses; ``loss.data[0]``, indexing the zero-dimensional loss torch 0.4 introduced) with none of the API
0.4 brought (``.item()``, ``torch.no_grad``, ``torch.device``, ``non_blocking=``, ``reduction=`` ...).
The Python files of the linted file's folder are read as text (a file that no longer parses counts too);
any sign of torch >= 0.4 there leaves the answer False.  A folder with no sign either way is one part of a
project written for one torch: then the folders beside it are read the same way (its parent's own files and
its parent's other sub-folders, one level down), but only inside the tree being linted, so no other project
is read: any sign of torch >= 0.4 there, or no sign of the old torch, leaves the answer False.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

#: written for torch <= 0.3: an async= keyword to .cuda() / .to(), a loss read as loss.data[0]
_OLD = re.compile(r"\.cuda\([^)\n]*\basync\s*=|\bloss\w*\.data\[0\]")
#: the API torch 0.4 and later brought
#: (``reduction=`` as a keyword of a call or a def only: ``reduction = True`` is a plain variable of the
#: user's, not the loss API)
_NEW = re.compile(r"\.item\(\)|\bno_grad\b|\btorch\.device\(|\bnon_blocking\s*=|\bset_grad_enabled\b"
                  r"|\binference_mode\b|[(,]\s*reduction\s*=(?!=)|\btorch\.tensor\(")
_MAX_FILES = 200
_MAX_CHARS = 400_000


@lru_cache(maxsize=256)
def _folder_era(folder: Path) -> bool | None:
    """True when the Python files of ``folder`` use a torch-0.3 idiom and nothing of torch 0.4's API,
    False when they use something of torch 0.4's API, None when they show neither."""
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
    return True if old else None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@lru_cache(maxsize=256)
def _beside_era(folder: Path, root: Path) -> bool:
    """Read the folders beside ``folder`` (its parent and the parent's other sub-folders), when the parent
    is inside ``root``: True when one of them shows the old torch and none shows torch 0.4's API."""
    parent = folder.parent
    if parent == folder or not _inside(parent, root):
        return False
    try:
        beside = [parent] + sorted(d for d in parent.iterdir() if d.is_dir() and d != folder
                                   and not d.name.startswith("."))[:_MAX_FILES]
    except OSError:
        return False
    eras = [_folder_era(d) for d in beside]
    return not any(e is False for e in eras) and any(e is True for e in eras)


def written_for_torch_before_04(path: Path | None, root: Path | None = None) -> bool:
    """Is the file at ``path`` part of code written for torch before 0.4 (see the module's docstring)?
    ``root`` is the tree being linted (None: the file's own folder alone is read).  False for source
    without a file."""
    if path is None:
        return False
    try:
        folder = path.resolve().parent
        era = _folder_era(folder)
        if era is not None:
            return era
        return root is not None and _beside_era(folder, root.resolve())
    except OSError:
        return False
