"""The running script's namespace (``__main__``), for the checks that wrap the script's own functions by name."""

from __future__ import annotations

import sys


def script_grown(namespace: dict | None, seen: int) -> tuple[dict, str] | None:
    """``(namespace, filename)`` of the running script when it holds another number of names than ``seen`` (the
    size the caller last looked at: a length compared, nothing else on a step); None when no script runs (an
    interactive session, ``python -c``), nothing was defined since, or ``__main__`` is no longer ``namespace``, the
    one the caller looked at before (its wrappers live there)."""
    main = sys.modules.get("__main__")
    if main is None or len(main.__dict__) == seen:
        return None
    filename = getattr(main, "__file__", None)
    if not filename or (namespace is not None and main.__dict__ is not namespace):
        return None
    return main.__dict__, filename
