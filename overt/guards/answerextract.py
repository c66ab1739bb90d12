"""An answer extractor reads the whole number its text writes: a minus sign and decimals included (slug
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
nothing (None, an empty string) while the unsigned text gives a number, (b) it returned a positive number
that the text writes only with a minus (never unsigned) and the unsigned text gives the same number, or (c) it
returned a number that the text writes only as the whole or the fractional digits of a decimal of another value
(``\\d+`` reading ``3.5`` as 3 or 5; calls whose text holds a decimal are kept too).

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
#: a decimal number of a text (its whole part read alone is another number)
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.]*\d)")
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
                    if index is not None and (UNARY.search(args[index]) or DECIMAL.search(args[index])) \
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
            number = _value(kept.result)
            part = None if number is None else _fragment(text, number)
            if part == "decimals":
                broken.append((kept, "decimals", None))
                continue
            if UNARY.search(text) is None or (part is None and not _nothing(kept.result)):
                continue
            args = kept.args[:kept.index] + (UNARY.sub("", text),) + kept.args[kept.index + 1:]
            try:
                again = _quiet(watch.fn, *args, **kept.kwargs)
            except Exception:  # noqa: BLE001  the user's function on another text: no premise
                continue
            other = _value(again)
            if other is None:
                continue
            if _nothing(kept.result):
                broken.append((kept, "unreadable", again))
            elif part == "sign" and number == other:
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
        elif how == "unsigned":
            what = (f"on the text {shown!r} ({at}) it returns {kept.result!r}, a number that text writes only with "
                    f"a minus sign, and the same text without the sign gives the same {again!r}: its pattern reads "
                    "the digits without their sign, so every negative answer is read as positive")
        else:
            what = (f"on the text {shown!r} ({at}) it returns {kept.result!r}, a number that text writes only as "
                    "a piece of a longer decimal: its pattern splits the number at the decimal point, so every answer "
                    "with decimals is read as another number")
        message = (f"the answer extractor {watch.name}() defined at {defined} does not read the whole number its text "
                   f"writes: {what} ({len(broken)} of the {len(watch.kept)} texts with a signed or decimal number it "
                   "was given). An exact match of extracted answers then scores a perfect answer to every such "
                   "question as wrong, and the reported accuracy is not the model's while nothing fails.")
        fix = (f"let the number pattern in {watch.name}() take an optional sign and decimals (r\"-?\\d+\" or "
               "r\"[+-]?\\d+\", r\"-?\\d+(?:\\.\\d+)?\" with decimals), and check it on a reference whose "
               "answer is negative or has decimals: it must come back as written.")
        return watch.name, f"{watch.name}() at {defined}", message, fix


def _fragment(text: str, number: float) -> str | None:
    """How ``text`` writes ``number`` when it writes it only as part of a longer number: "sign" (only after a
    unary minus), "decimals" (only as the whole or the fractional digits of a decimal of another value); None
    when the text writes it as a whole number somewhere, or not at all."""
    whole: set[float] = set()
    signed = decimals = False
    for match in NUMBER.finditer(text):
        digits = match.group(1)
        negative = match.group(0).startswith("-") and UNARY.match(text, match.start()) is not None
        value = float(digits)
        whole.add(-value if negative else value)
        if "." in digits and value != number and any(float(part) == number for part in digits.split(".")):
            decimals = True
        elif negative and value == number:
            signed = True
    if number in whole or number <= 0:
        return None
    return "decimals" if decimals else "sign" if signed else None
