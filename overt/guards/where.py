"""Find the user's own file:line on the stack, skipping torch, overt and the standard library."""

from __future__ import annotations

import inspect
import linecache
import os
import re
import sys
import sysconfig
from typing import Any

_SKIP_DIRS: tuple[str, ...] = ()
_IS_USER: dict[str, bool] = {}  # code file name -> outside torch, overt and the standard library


def _skip_dirs() -> tuple[str, ...]:
    global _SKIP_DIRS
    if not _SKIP_DIRS:
        import torch

        dirs = {os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__))}
        for key in ("stdlib", "platstdlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                dirs.add(path)
        _SKIP_DIRS = tuple(os.path.realpath(d) + os.sep for d in dirs)
    return _SKIP_DIRS


_SHORT: dict[tuple[str, str], str] = {}


def _short(path: str) -> str:
    try:
        key = (path, os.getcwd())
    except OSError:
        return path
    short = _SHORT.get(key)
    if short is None:
        try:
            rel = os.path.relpath(path)
        except ValueError:
            rel = ".."
        short = _SHORT[key] = path if rel.startswith("..") else rel
    return short


def user_location(skip: int = 1) -> str | None:
    """``"file.py:LINE"`` of the innermost frame that belongs to the user's code, or None."""
    return user_location_from(sys._getframe(skip))


def user_location_from(frame: Any) -> str | None:
    """``"file.py:LINE"`` of the innermost frame of the user's code from ``frame`` outwards, or None."""
    known = _IS_USER
    while frame is not None:
        filename = frame.f_code.co_filename
        user = known.get(filename)  # (is_user_file's answer, read inline: this walks a dozen frames per call)
        if user is None:
            user = is_user_file(filename)
        if user:
            return f"{_short(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def user_frames(frame: Any) -> list[tuple[Any, bool]]:
    """The user's frames from ``frame`` outwards, innermost first, each with whether it is the outermost of its run
    (its caller is not the user's code: a script's top level, or a user function that torch or overt called) --
    the walk of the checks that read the objects of the user's frames, with a file's answer read inline (a walk
    goes through some thirty frames of the engine and torch per call)."""
    known = _IS_USER
    frames: list[Any] = []
    users: list[bool] = []
    while frame is not None:
        filename = frame.f_code.co_filename
        frames += (frame,)
        users += (known[filename] if filename in known else is_user_file(filename),)
        frame = frame.f_back
    users += (False,)
    return [(f, not users[i + 1]) for i, f in enumerate(frames) if users[i]]


def is_user_file(filename: str) -> bool:
    """Whether code from ``filename`` is the user's (not torch, overt, the standard library)."""
    if filename.startswith("<"):
        _IS_USER[filename] = False
        return False
    user = _IS_USER.get(filename)
    if user is None:  # realpath costs system calls: once per file
        user = _IS_USER[filename] = not os.path.realpath(filename).startswith(_skip_dirs())
    return user


_USER_CLASS: dict[type, bool] = {}  # class -> defined in a user's file
_MAX_CLASSES = 1 << 14  # (a program that makes classes on the fly: the table starts again past this many)


def user_class(cls: type) -> bool:
    """Whether ``cls`` is defined in a user's file (its source file, as ``inspect`` finds it, is the user's); one
    look at the source per class for the whole process, shared by the checks that ask."""
    found = _USER_CLASS.get(cls)
    if found is None:
        try:
            path = inspect.getsourcefile(cls)
        except (OSError, TypeError):
            path = None
        found = bool(path) and is_user_file(path)
        if len(_USER_CLASS) >= _MAX_CLASSES:
            _USER_CLASS.clear()
        _USER_CLASS[cls] = found
    return found


def short_location(filename: str, lineno: int) -> str:
    """``"file.py:LINE"`` with the file relative to the working directory when that is shorter."""
    return f"{_short(filename)}:{lineno}"


def user_frame(skip: int = 1) -> Any:
    """The innermost frame of the user's code from the caller's ``skip``-th frame outwards, or None."""
    frame = sys._getframe(skip + 1)
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def assignment_location(frame: Any, name: str, back: int = 200) -> str:
    """``file:line`` of the last line above ``frame``'s current line (at most ``back`` lines up) that assigns
    ``name`` (``name = ...`` or ``name: T = ...``), or ``""`` when none does."""
    pat = re.compile(rf"^\s*{re.escape(name)}\s*(:[^=]*)?=(?!=)")
    file = frame.f_code.co_filename
    for line in range(frame.f_lineno - 1, max(0, frame.f_lineno - back), -1):
        if pat.match(linecache.getline(file, line)):
            return short_location(file, line)
    return ""


def class_source(obj: object) -> tuple[str, list[str], int] | None:
    """(file, source lines, first line) of the class of ``obj``, if Python can tell."""
    cls = type(obj)
    try:
        path = inspect.getsourcefile(cls)
        lines, line = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    return (path, lines, line) if path else None


def class_location(obj: object) -> str | None:
    """``"file.py:LINE"`` where ``type(obj)`` is defined, if Python can tell."""
    found = class_source(obj)
    return f"{_short(found[0])}:{found[2]}" if found else None


def from_torch(frame: object) -> bool:
    """Whether ``frame`` (a caller's frame) runs torch's own code: a call torch makes itself (``F.softmax``
    calling the tensor method, ``nn.Dropout`` calling ``F.dropout``, torch unpickling what ranks sent)."""
    code = getattr(frame, "f_code", None)
    return code is not None and code.co_filename.startswith(_torch_dir())


def is_overt_file(filename: str) -> bool:
    """Whether ``filename`` is one of overt's own source files."""
    return filename.startswith(_overt_dir())


def from_torch_or_overt_file(filename: str) -> bool:
    """Whether ``filename`` is one of torch's or overt's own source files."""
    return filename.startswith(_torch_dir()) or filename.startswith(_overt_dir())


_OVERT_DIR = ""


def _overt_dir() -> str:
    global _OVERT_DIR
    if not _OVERT_DIR:
        _OVERT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return _OVERT_DIR


_TORCH_DIR = ""


def _torch_dir() -> str:
    global _TORCH_DIR
    if not _TORCH_DIR:
        import torch

        _TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
    return _TORCH_DIR
