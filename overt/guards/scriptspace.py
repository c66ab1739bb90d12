"""The running script's namespace (``__main__``), for the checks that wrap the script's own functions by name."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable


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


class OneCallWrappers:
    """The script functions a check wraps by name in ``__main__``, each until one of its calls is recorded.

    ``grown()`` says whether the script defined names since the last look (the filename, to tell its own functions);
    ``wrap(name, fn, record)`` puts a wrapper in the namespace that calls ``fn`` and gives ``record(args, kwargs,
    result)`` the call: once ``record`` keeps one (returns True), or after ``tries`` calls none was kept, the script's
    own function is back in the namespace (a reference the script kept to the wrapper looks no further once a call is
    kept); ``put_back()`` undoes every wrapper still in place.  An exception in ``record`` goes to the check's
    ``check_failed`` and ends the looking: a guard never breaks the user's call."""

    def __init__(self, check: Any, tries: int):
        self.check, self.tries = check, tries
        self.namespace: dict | None = None
        self.seen = -1  # the namespace's size when last looked at
        self.looked: set[str] = set()  # names wrapped once already
        self.wrapped: dict[str, tuple[Any, Any]] = {}  # name -> (the script's function, its wrapper)

    def grown(self) -> str | None:
        found = script_grown(self.namespace, self.seen)
        if found is None:
            return None
        self.namespace, filename = found
        self.seen = len(self.namespace)
        return filename

    def wrap(self, name: str, fn: Any, record: Callable[[tuple, dict, Any], bool]) -> None:
        assert self.namespace is not None
        self.looked.add(name)
        calls = [0]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            if calls[0] < 0:  # recorded already
                return result
            calls[0] += 1
            try:
                kept = record(args, kwargs, result)
            except Exception as exc:  # noqa: BLE001  a guard never breaks the user's call
                self.check.s.check_failed(self.check, exc)
                kept = True
            if (kept or calls[0] >= self.tries) and self.namespace is not None \
                    and self.namespace.get(name) is wrapper:
                self.namespace[name] = fn  # one call recorded, or none of the first few fit: the script's own again
            if kept:
                calls[0] = -1
            return result

        self.wrapped[name] = (fn, wrapper)
        self.namespace[name] = wrapper

    def put_back(self) -> None:
        if self.namespace is not None:
            for name, (fn, wrapper) in self.wrapped.items():
                if self.namespace.get(name) is wrapper:
                    self.namespace[name] = fn
        self.wrapped = {}
