"""The user's own line in an exception's traceback: the innermost frame outside overt's package
folder (compared as a folder, so a user's project in a folder named "overt" is still the user's),
and outside installed libraries when a frame of the user's own code is there."""

from __future__ import annotations

import os
import traceback

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def is_overt_file(filename: str) -> bool:
    """Whether ``filename`` is one of overt's own source files."""
    return os.path.abspath(filename).startswith(_PACKAGE)


def _library(filename: str) -> bool:
    parts = filename.replace("\\", "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc`` in the user's code: outside overt and, when there is one,
    outside installed libraries (else the innermost outside overt); None when every frame is overt's."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not is_overt_file(f.filename)]
    own = [f for f in frames if not _library(f.filename)]
    return (own or frames)[-1] if frames else None
