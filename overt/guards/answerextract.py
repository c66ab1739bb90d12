"""An answer extractor reads a number written with a minus sign as that negative number (slug
``metric-imperfect-on-truth``; issue 33).

Premise: a function that reads a number out of a text (an answer pulled from a model's completion or from a
reference solution by a regular expression) and reads texts of that form, must read a number written with a
unary minus (``#### -3``, ``= -3``, ``(-3)``) as negative: when the text with its unary minus signs taken out
gives the same number, the sign was never read, and when only that text gives a number, every negative answer is
unreadable.  An exact match on such answers scores a perfect prediction of a negative reference as wrong, so the
metric is not the metric while nothing fails.

What is observed: functions of the running script (``__main__``, defined in its file, not already wrapped by
another probe) whose own constants hold a regular expression for digits (``\\d`` or ``[0-9]``), wrapped when an
evaluation begins (the metric probe's moment); each call's first text argument is looked at for a unary minus
before a digit (one compiled search per call, at most :data:`MAX_CALLS` calls, after which the original function
is put back).  Up to :data:`KEEP` such calls are kept (the text, the other arguments, the result).  At the end of
the run each kept call is repeated once on the text without its unary minus signs, with output suppressed.

When reported: the function returned a number on some call of the run, and on a kept call (a) it returned
nothing (None, an empty string) while the unsigned text gives a number, or (b) it returned a positive number
that the text writes only with a minus (never unsigned) and the unsigned text gives the same number.

What stays silent: a function that reads the sign (the two texts give different numbers), a number that is
also written unsigned in the text, a minus between two operands (``5 - 3``) or inside a word, a date or an
exponent (``2020-11``, ``1e-5``), other arguments that are not plain values (no repeat), a repeat that raises,
a function that never returned a number.  Not seen: extractors that are methods or lambdas, a pattern compiled
outside the function, a function called only before the first evaluation.
"""

from __future__ import annotations

import functools
import math
import re
import types
from typing import Any, Callable

from overt.guards.metricdef import _quiet
from overt.guards.where import short_location, user_location

#: a minus sign written before a number as its sign (not between two operands, not inside a word, a date, an
#: exponent or a range of numbers)
UNARY = re.compile(r"(?<![\w.\-+)\]}])-(?=\d)")
#: a number token of a text: its sign (a unary minus, read with :data:`UNARY`) and its digits
NUMBER = re.compile(r"(?<![\w.])-?(\d+(?:\.\d+)?)(?![\w.]*\d)")
#: the regular-expression spellings of a digit that make a function a number extractor
DIGIT_CLASSES = ("\\d", "[0-9]")
MAX_CALLS = 2000  # calls of one function looked at before the original is put back
KEEP = 16  # calls whose text holds a unary minus kept for the repeat at the end
PLAIN = (str, int, float, bool, type(None))


def extractor(fn: Any, filename: str) -> bool:
    """Whether ``fn`` is a plain function of the script whose own constants hold a pattern for digits."""
    if not isinstance(fn, types.FunctionType) or hasattr(fn, "__wrapped__"):
        return False
    code = fn.__code__
    if code.co_filename != filename or code.co_argcount < 1:
        return False
    return any(isinstance(c, str) and any(d in c for d in DIGIT_CLASSES) for c in code.co_consts)


def _value(result: Any) -> float | None:
    """The number a function returned (an int, a float or a string of one), else None."""
    if isinstance(result, bool):
        return None
    if isinstance(result, (int, float)):
        return float(result) if math.isfinite(result) else None
    if isinstance(result, str):
        try:
            number = float(result.strip().replace(",", ""))
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _nothing(result: Any) -> bool:
    return result is None or (isinstance(result, str) and not result.strip())


class _Kept:
    __slots__ = ("index", "args", "kwargs", "result", "loc")

    def __init__(self, index: int, args: tuple, kwargs: dict, result: Any, loc: str | None):
        self.index, self.args, self.kwargs, self.result, self.loc = index, args, kwargs, result, loc


class _Watch:
    """The record of one wrapped extractor."""

    def __init__(self, name: str, fn: types.FunctionType, wrapper: Callable):
        self.name, self.fn, self.wrapper = name, fn, wrapper
        self.calls = 0
        self.read_number = False  # some call of the run returned a number
        self.kept: list[_Kept] = []


class AnswerExtractors:
    """Wraps the script's number extractors at an evaluation and repeats their signed calls at the end."""

    def __init__(self) -> None:
        self.watches: dict[str, _Watch] = {}
        self.namespace: dict | None = None

    def wrap(self, namespace: dict, filename: str, skip: set[str] | frozenset[str] = frozenset()) -> None:
        """Wrap the extractors of ``namespace`` not wrapped yet (``skip``: names another probe wrapped)."""
        if self.namespace is not None and namespace is not self.namespace:
            return
        self.namespace = namespace
        for name, fn in list(namespace.items()):
            if name in self.watches or name in skip or not extractor(fn, filename):
                continue
            watch = _Watch(name, fn, fn)
            watch.wrapper = self._wrapper(watch)
            self.watches[name] = watch
            namespace[name] = watch.wrapper

    def _wrapper(self, watch: _Watch) -> Callable:
        fn = watch.fn

        @functools.wraps(fn)
        def extract(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            watch.calls += 1
            if watch.calls >= MAX_CALLS:
                self._put_back(watch)
            try:
                if not watch.read_number and _value(result) is not None:
                    watch.read_number = True
                if len(watch.kept) < KEEP:
                    index = next((i for i, a in enumerate(args) if isinstance(a, str)), None)
                    if index is not None and UNARY.search(args[index]) is not None \
                            and all(isinstance(a, PLAIN) for a in args) \
                            and all(isinstance(v, PLAIN) for v in kwargs.values()):
                        watch.kept.append(_Kept(index, args, dict(kwargs), result, user_location(2)))
            except Exception:  # noqa: BLE001  a guard never breaks the user's call
                pass
            return result

        return extract

    def _put_back(self, watch: _Watch) -> None:
        if self.namespace is not None and self.namespace.get(watch.name) is watch.wrapper:
            self.namespace[watch.name] = watch.fn

    def remove(self) -> None:
        """Put every original function back."""
        for watch in self.watches.values():
            self._put_back(watch)

    def findings(self) -> list[tuple[str, str, str, str]]:
        """(name, where, message, fix) of each extractor that drops the sign of a number its text writes."""
        found = []
        for watch in self.watches.values():
            if not watch.read_number:
                continue
            result = self._first_broken(watch)
            if result is not None:
                found.append(result)
        self.watches = {}
        return found

    def _first_broken(self, watch: _Watch) -> tuple[str, str, str, str] | None:
        code = watch.fn.__code__
        defined = short_location(code.co_filename, code.co_firstlineno)
        broken: list[tuple[_Kept, str, Any]] = []
        for kept in watch.kept:
            text = kept.args[kept.index]
            unsigned = UNARY.sub("", text)
            args = kept.args[:kept.index] + (unsigned,) + kept.args[kept.index + 1:]
            try:
                again = _quiet(watch.fn, *args, **kept.kwargs)
            except Exception:  # noqa: BLE001  the user's function on another text: no premise
                continue
            number, other = _value(kept.result), _value(again)
            if other is None:
                continue
            if _nothing(kept.result):
                broken.append((kept, "unreadable", again))
            elif number is not None and number > 0 and number == other and _only_negative(text, number):
                broken.append((kept, "unsigned", again))
        if not broken:
            return None
        kept, how, again = broken[0]
        text = kept.args[kept.index]
        shown = text if len(text) <= 80 else text[:77] + "..."
        at = f"the call at {kept.loc}" if kept.loc else "a call"
        if how == "unreadable":
            what = (f"on the text {shown!r} ({at}) it returns {kept.result!r}, and on the same text with its minus "
                    f"sign taken out it returns {again!r}: its pattern cannot read a number written with a minus, "
                    "so every negative answer is unreadable")
        else:
            what = (f"on the text {shown!r} ({at}) it returns {kept.result!r}, a number that text writes only with "
                    f"a minus sign, and the same text without the sign gives the same {again!r}: its pattern reads "
                    "the digits without their sign, so every negative answer is read as positive")
        message = (f"the answer extractor {watch.name}() defined at {defined} does not read the sign of a number: "
                   f"{what} ({len(broken)} of the {len(watch.kept)} texts with a negative number it was given). "
                   "An exact match of extracted answers then scores a perfect answer to every question whose answer "
                   "is negative as wrong, and the reported accuracy is not the model's while nothing fails.")
        fix = (f"let the number pattern in {watch.name}() take an optional sign (r\"-?\\d+\" or r\"[+-]?\\d+\", and "
               "r\"-?\\d+(?:\\.\\d+)?\" for decimals), and check it on a reference whose answer is negative: "
               "it must come back negative.")
        return watch.name, f"{watch.name}() at {defined}", message, fix


def _only_negative(text: str, number: float) -> bool:
    """Whether ``text`` writes ``number`` with a unary minus and never without one."""
    signed = unsigned = False
    for match in NUMBER.finditer(text):
        if float(match.group(1)) != number:
            continue
        if match.group(0).startswith("-") and UNARY.match(text, match.start()) is not None:
            signed = True
        else:
            unsigned = True
    return signed and not unsigned
