"""Reading raw inputs for ``overt predict``: CSV rows, ``.npy`` arrays, text lines, or literal strings,
streamed in chunks (memory stays bounded however large the input is).

Every way a file can be unreadable is an :class:`InputError` naming the file (and the line):
bytes that are not UTF-8, a CSV quote never closed, a row with more or fewer cells than the
header, a record of empty cells, an empty or damaged ``.npy``.  Nothing is dropped silently (a
blank line is not a record, as in pandas); a byte-order mark is not part of the first column's name.

Whether a CSV's first row is a header is decided with what the run recorded about its inputs
(:class:`Expect`, from ``inputs.json``): a row with a cell that is not a number is a header; so is
a row of numbers that spells the model's own column names (``0,1,...,63``, what
``pandas.DataFrame(X).to_csv(index=False)`` writes for unnamed columns, or the recorded feature
names); that choice is said on stderr."""

from __future__ import annotations

import csv
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from overt.errors import OvertError

FORMATS = ("csv", "npy", "text")
#: the largest CSV cell read (characters); a larger one is an error, not a crash
MAX_CELL = 1 << 20
#: the longest line read (bytes): one longer is an error, never read whole into memory
MAX_LINE = 1 << 26


class InputError(OvertError):
    """Inputs that ``overt predict`` cannot read."""


@dataclass(frozen=True)
class Expect:
    """What the run's model takes, as its ``inputs.json`` records it: sentences (``text``), or rows of
    ``width`` numbers, named ``features`` when the recipe declared names.  Unknown fields are None."""

    text: bool = False
    width: int | None = None
    features: tuple[str, ...] | None = None

    @property
    def numeric(self) -> bool:
        return not self.text and (self.width is not None or self.features is not None)

    def default_format(self) -> str:
        """How stdin (and a file whose name says nothing) is read: CSV for a model of numbers, else text."""
        return "csv" if self.numeric else "text"


def format_of(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return "csv" if suffix == ".csv" else "npy" if suffix == ".npy" else "text"


def _not_utf8(data: bytes, start: int, source: str, line: int, offset: int) -> InputError:
    return InputError(f"{source} is not UTF-8 text: byte {offset + start} (line {line}) is {data[start]:#04x}",
                      why="overt predict reads CSV and text inputs as UTF-8; guessing another encoding could "
                          "change the values silently",
                      fix="convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or give numeric arrays as .npy")


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark removed), or :class:`InputError` naming where it is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _not_utf8(data, exc.start, source, data[:exc.start].count(b"\n") + 1, 0) from None


def _lines(stream: Any, source: str) -> Iterator[str]:
    """The decoded lines of a binary (or text) stream, one at a time, each with its line ending."""
    offset, number = 0, 0
    while True:
        raw = stream.readline(MAX_LINE + 1)
        if not raw:
            return
        number += 1
        if isinstance(raw, str):
            yield raw.lstrip("\ufeff") if number == 1 else raw
            continue
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            raise InputError(f"{source}, line {number} is longer than {MAX_LINE >> 20} MiB",
                             why="one input is one line; a line that long is not an input overt can read",
                             fix="split the input into lines (one row per line)")
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(raw, exc.start, source, number, offset) from None
        offset += len(raw)
        yield text


def _numeric(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _header(cells: list[str], expect: Expect, source: str, say: Callable[[str], None]) -> list[str] | None:
    """The column names when the first record ``cells`` is a header, else None (it is data)."""
    names = [c.strip() for c in cells]
    if not all(_numeric(c) for c in names):
        return names
    shown = ",".join(names[:3]) + (",...," + names[-1] if len(names) > 4 else "," + ",".join(names[3:]))
    if expect.features is not None and names == list(expect.features):
        say(f"overt predict: line 1 of {source} ({shown}) is read as a header: it spells the model's "
            "feature names")
        return names
    counting = len(names) >= 2 and names == [str(i) for i in range(len(names))]
    if counting and expect.features is None and expect.width == len(names):
        say(f"overt predict: line 1 of {source} ({shown}) is read as a header, not as data: it names the "
            f"model's {len(names)} unnamed columns 0..{len(names) - 1}, as pandas writes them (to_csv(index=False))")
        return names
    if counting:
        say(f"overt predict: line 1 of {source} ({shown}) is read as data; if it is a header of column "
            f"numbers, remove it (the run records no schema that could tell)")
    return None


def csv_records(lines: Iterable[str], source: str, expect: Expect = Expect(),
                say: Callable[[str], None] = lambda message: None,
                on_header: Callable[[list[str]], None] = lambda names: None) -> Iterator[tuple[int, Any]]:
    """``(line, row)`` for each record of a CSV, in order: a dict when the first record is a header
    (see :func:`_header`), a list of cells otherwise.  Blank lines are not records; a quote never
    closed, a cell over :data:`MAX_CELL` characters, a record whose cell count differs from the
    header's or a record of empty cells is an :class:`InputError` naming the line."""
    previous = csv.field_size_limit()
    csv.field_size_limit(MAX_CELL)
    reader = csv.reader(lines, strict=True)
    header: list[str] | None = None
    width: int | None = None
    try:
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise InputError(f"{source}, line {reader.line_num + 1}: {exc}",
                                 why="a damaged row would be read as something else, or rows would be lost",
                                 fix="close the quote / split the cell; every row needs the same cells as the "
                                     "first") from None
            if not row:
                continue  # a blank line
            line = reader.line_num
            if width is None:
                header = _header(row, expect, source, say)
                width = len(row)
                if header is not None and expect.features is None and all(_numeric(h) for h in header):
                    header = []  # the model's unnamed columns 0..N-1, in order: rows are read as they are
                if header is not None:
                    on_header(header)
                    continue
            if not any(cell.strip() for cell in row):
                raise InputError(f"{source}, line {line}: a record of {len(row)} empty cell(s)",
                                 why="it has no values to answer for, and dropping it would shift every later "
                                     "answer by one line",
                                 fix="delete the line, or fill in its values")
            if len(row) != width:
                what = "the header's" if header is not None else "the first row's"
                raise InputError(f"{source}, line {line}: {len(row)} cells, {what} {width}",
                                 why="an extra or missing cell shifts every value after it into the wrong column",
                                 fix="give every row exactly the columns of the header" if header is not None else
                                     "give every row the same number of values")
            yield line, (dict(zip(header, row)) if header else row)
    finally:
        csv.field_size_limit(previous)


def csv_rows(text: str, source: str = "the CSV input", expect: Expect = Expect()) -> list[Any]:
    """Every row of a CSV text (see :func:`csv_records`)."""
    return [row for _, row in csv_records(text.splitlines(keepends=True), source, expect)]


def _npy(path: str) -> Any:
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False, mmap_mode="r")  # memory-mapped: read as it is used
    except ValueError as exc:
        raise InputError(f"{path} is not a plain numeric .npy array: {exc}",
                         why="object arrays would need unpickling, which overt never does",
                         fix="save a numeric array with numpy.save") from None
    except (EOFError, OSError) as exc:
        raise InputError(f"{path} is not a readable .npy file: {exc or 'it is empty'}",
                         fix="save the inputs with numpy.save(path, array)") from None
    if not isinstance(array, np.ndarray):  # an .npz archive
        raise InputError(f"{path} is an .npz archive, not one .npy array", fix="give one array saved with numpy.save")
    return array if array.ndim > 0 else array.reshape(1)


def npy_rows(path: str) -> list[Any]:
    return list(_npy(path))


def text_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


class Inputs:
    """The inputs of one ``overt predict`` call, read lazily: :meth:`chunks` gives them ``size`` at a
    time, in order, and :meth:`where` names the file and line of an input by its number.

    ``items``: files (format by extension, or ``fmt``), ``-`` for stdin, or literal strings (an
    argument that is not a file); no items reads stdin (as CSV for a model of numbers, else text)."""

    def __init__(self, items: Iterable[str], fmt: str | None = None, stdin: Any = None, *,
                 expect: Expect = Expect(), say: Callable[[str], None] | None = None):
        self.items = list(items) or ["-"]
        self.fmt = fmt
        self.stdin = stdin if stdin is not None else sys.stdin
        self.expect = expect
        self.say = say or (lambda message: print(message, file=sys.stderr, flush=True))
        self.count = 0  # inputs read so far
        self.done_bytes = 0  # bytes of finished files
        self.total_bytes = 0  # size of every input file (0: unknown, e.g. stdin)
        self._open: Any = None
        self._had_header = False  # the file being read began with a header
        self._spans: list[tuple[int, str, list[int] | None]] = []  # (first input, source, line of each input)

    # -- where an input came from -------------------------------------------------------------------
    def where(self, index: int) -> str:
        """``"rows.csv, line 12"`` for input ``index`` (0-based, over every source), as far as it is known."""
        found = ""
        for first, source, lines in self._spans:
            if index < first:
                break
            if lines is not None and index - first < len(lines):
                found = f"{source}, line {lines[index - first]}"
            else:
                found = f"{source}, input {index - first}"
        return found or f"input {index}"

    def fraction(self) -> float | None:
        """How much of the input files has been read (None when their size is unknown)."""
        if not self.total_bytes:
            return None
        now = self._open.tell() if self._open is not None and not self._open.closed else 0
        return min(1.0, (self.done_bytes + now) / self.total_bytes)

    # -- reading ------------------------------------------------------------------------------------
    def chunks(self, size: int) -> Iterator[list[Any]]:
        """Lists of at most ``size`` inputs, in order; the line of each kept for :meth:`where`."""
        for item in self.items:
            if item != "-" and Path(item).is_file():
                try:
                    self.total_bytes += os.stat(item).st_size
                except OSError:
                    pass
        for item in self.items:
            before = self.count
            yield from self._chunks_of(item, size)
            if self.count == before and item != "-" and Path(item).is_file():
                header = " below its header" if self._had_header else ""
                self.say(f"overt predict: {item} holds no inputs (0 rows{header})")

    def _chunks_of(self, item: str, size: int) -> Iterator[list[Any]]:
        self._had_header = False
        if item == "-":
            kind = self.fmt or self.expect.default_format()
            if kind == "npy":
                raise InputError("cannot read .npy arrays from stdin", fix="give the .npy file's path")
            stream = getattr(self.stdin, "buffer", None) if self.stdin is not None else None
            stream = stream if stream is not None else self.stdin
            if stream is None:
                raise InputError("stdin is closed, and no inputs were given", fix="give input files, or pipe inputs in")
            yield from self._stream(stream, kind, "stdin", size)
            return
        path = Path(item)
        if path.is_file():
            kind = self.fmt or format_of(item)
            if kind == "npy":
                array = _npy(item)
                self._spans.append((self.count, item, None))
                for start in range(0, len(array), size):
                    part = list(array[start:start + size])
                    self.count += len(part)
                    yield part
                self.done_bytes += path.stat().st_size
                return
            try:
                handle = open(path, "rb")
            except OSError as exc:
                raise InputError(f"input file {item} cannot be read: {exc.strerror or exc}") from None
            with handle:
                self._open = handle
                try:
                    yield from self._stream(handle, kind, item, size)
                finally:
                    self._open = None
                    self.done_bytes += path.stat().st_size
        elif path.suffix.lower() in (".csv", ".npy", ".txt", ".jsonl") or self.fmt in ("csv", "npy"):
            raise InputError(f"input file {item} does not exist", fix="check the path")
        else:  # a literal input: a sentence, or for a model of numbers one row of comma-separated numbers
            self._spans.append((self.count, "the command line", None))
            self.count += 1
            numbers = self.expect.numeric and (self.fmt or "csv") == "csv"
            yield [next(csv.reader([item]), [item]) if numbers else item]

    def _stream(self, stream: Any, kind: str, source: str, size: int) -> Iterator[list[Any]]:
        try:
            lines = _lines(stream, source)
            if kind == "csv":
                def header(names: list[str]) -> None:
                    self._had_header = True

                records: Iterator[tuple[int, Any]] = csv_records(lines, source, self.expect, self.say, header)
            else:
                records = ((n, line.rstrip("\r\n")) for n, line in enumerate(lines, 1) if line.strip())
            numbers: list[int] = []
            chunk: list[Any] = []
            self._spans.append((self.count, source, numbers))
            for line, row in records:
                chunk.append(row)
                numbers.append(line)
                if len(chunk) == size:
                    self.count += len(chunk)
                    yield chunk
                    chunk = []
                    self._trim(numbers)
            if chunk:
                self.count += len(chunk)
                yield chunk
        except (OSError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"{source} cannot be read: {getattr(exc, 'strerror', None) or exc}",
                             fix="give input files, or pipe inputs in") from None

    def _trim(self, numbers: list[int]) -> None:
        """Forget the lines of inputs answered long ago (memory stays bounded); keep the recent ones."""
        keep = 1 << 16
        if len(numbers) > 2 * keep:
            first, source, _ = self._spans[-1]
            drop = len(numbers) - keep
            del numbers[:drop]
            self._spans[-1] = (first + drop, source, numbers)


def read_inputs(items: Iterable[str], fmt: str | None = None, stdin: Any = None,
                expect: Expect = Expect()) -> list[Any]:
    """Every input at once (see :class:`Inputs`)."""
    inputs = Inputs(items, fmt, stdin, expect=expect)
    return [x for chunk in inputs.chunks(4096) for x in chunk]
