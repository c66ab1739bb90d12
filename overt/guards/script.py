"""Run a script as ``__main__`` exactly as ``python script.py`` would (for ``overt run``).

What the script can observe is the interpreter's own set-up, not :mod:`runpy`'s:
``__file__`` is absolute, ``sys.path[0]`` is the script's real directory
(symbolic links resolved), ``sys.argv[0]`` is the path as typed,
``__builtins__`` is the module, ``__loader__`` a ``SourceFileLoader``, and the
new ``__main__`` module stays in ``sys.modules`` after the script ends (atexit
handlers, pickles of ``__main__`` classes and ``multiprocessing`` spawn see it,
as they would).  A traceback the script causes is printed through
``sys.excepthook`` without overt's own frames (:func:`without_our_frames`).
"""

from __future__ import annotations

import builtins
import os
import sys
import types
from importlib.machinery import SourceFileLoader

_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep  # overt/guards/: the runner and the wrappers


def run_as_main(script: str, argv: list[str]) -> None:
    """Execute ``script`` as the program's ``__main__`` with ``sys.argv = [script, *argv]``."""
    path = os.path.abspath(script)
    with open(path, "rb") as f:  # bytes: compile() honours the file's coding cookie
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None, __package__=None,
                         __loader__=SourceFileLoader("__main__", path), __spec__=None)
    sys.modules["__main__"] = main
    sys.argv = [script, *argv]
    directory = os.path.dirname(os.path.realpath(path))
    if sys.path:
        sys.path[0] = directory
    else:
        sys.path.insert(0, directory)
    exec(code, main.__dict__)


def _ours(tb: types.TracebackType) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(_OURS)


def without_our_frames(exc: BaseException) -> BaseException:
    """Drop overt's frames (this runner, the wrappers around ``torch.load``, the losses...)
    from ``exc``'s traceback and those of the exceptions chained to it, so the traceback
    reads as the plain run's."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        frames = []
        tb = e.__traceback__
        while tb is not None:
            if not _ours(tb):
                frames.append(tb)
            tb = tb.tb_next
        for a, b in zip(frames, frames[1:]):
            a.tb_next = b
        if frames:
            frames[-1].tb_next = None
        e.__traceback__ = frames[0] if frames else None
        todo += [e.__cause__, e.__context__]
    return exc


def print_uncaught(exc: BaseException) -> None:
    """Show ``exc`` as the interpreter would at the end of the script (``sys.excepthook``,
    which the script may have replaced)."""
    without_our_frames(exc)
    sys.excepthook(type(exc), exc, exc.__traceback__)
