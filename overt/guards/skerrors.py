"""scikit-learn's regression errors, seen while an evaluation lasts (for ``predictions-not-denormalised``).

A regression is often scored outside torch: ``mean_absolute_error(y_test, pred)`` on numpy arrays.
While :mod:`overt.guards.predshape` looks at an evaluation (from a watched model's evaluation forward until
training resumes) and scikit-learn's metrics are already imported by the script, the regression errors of
``sklearn.metrics`` -- the module's functions and the names the script's ``__main__`` bound to them
(``from sklearn.metrics import mean_absolute_error``) -- are replaced by wrappers that hand their
``(y_true, y_pred)`` to a callback and call the original; they are put back when the evaluation ends.
Nothing is imported here that the script did not import, and nothing runs on training steps.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

#: scikit-learn's regression errors, all ``(y_true, y_pred, ...)``
ERRORS = ("mean_absolute_error", "mean_squared_error", "root_mean_squared_error", "median_absolute_error",
          "r2_score", "mean_absolute_percentage_error", "explained_variance_score", "max_error")


class SklearnErrors:
    """The wrappers of one evaluation window: :meth:`install` and :meth:`remove`."""

    def __init__(self, seen: Callable[[str, Any, Any], None]):
        self.seen = seen  # called with (the metric's name, y_true, y_pred)
        self.saved: list[tuple[dict, str, Any]] = []  # (namespace, name, original)

    def install(self) -> None:
        metrics = sys.modules.get("sklearn.metrics")
        if metrics is None or self.saved:
            return
        main = sys.modules.get("__main__")
        spaces = [vars(metrics)] + ([vars(main)] if main is not None and main is not metrics else [])
        for name in ERRORS:
            orig = getattr(metrics, name, None)
            if orig is None or getattr(orig, "__overt_original__", None) is not None:
                continue
            wrapper = self._wrapper(name, orig)
            for space in spaces:
                for key, value in list(space.items()):
                    if value is orig:
                        self.saved.append((space, key, orig))
                        space[key] = wrapper

    def remove(self) -> None:
        for space, key, orig in reversed(self.saved):
            if getattr(space.get(key), "__overt_original__", None) is orig:
                space[key] = orig
        self.saved = []

    def _wrapper(self, name: str, orig: Any) -> Any:
        @functools.wraps(orig)
        def error(*args: Any, **kwargs: Any) -> Any:
            y_true = args[0] if args else kwargs.get("y_true")
            y_pred = args[1] if len(args) > 1 else kwargs.get("y_pred")
            if y_true is not None and y_pred is not None:
                self.seen(name, y_true, y_pred)
            return orig(*args, **kwargs)

        error.__overt_original__ = orig  # type: ignore[attr-defined]
        return error
