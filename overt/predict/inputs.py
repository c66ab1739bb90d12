"""Reading raw inputs for ``overt predict``: CSV rows, ``.npy`` arrays, text lines, or literal strings.

Every way a file can be unreadable is an :class:`InputError` naming the file (and the line):
bytes that are not UTF-8, a CSV quote never closed, a row with more or fewer cells than the
header, an empty or damaged ``.npy``.  Nothing is dropped silently; a byte-order mark is
not part of the first column's name."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from overt.errors import OvertError

FORMATS = ("csv", "npy", "text")
#: the largest CSV cell read (characters); a larger one is an error, not a crash
MAX_CELL = 1 << 20


class InputError(OvertError):
    """Inputs that ``overt predict`` cannot read."""


def format_of(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return "csv" if suffix == ".csv" else "npy" if suffix == ".npy" else "text"


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark removed), or :class:`InputError` naming where it is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"{source} is not UTF-8 text: byte {exc.start} (line {line}) is {data[exc.start]:#04x}",
                         why="overt predict reads CSV and text inputs as UTF-8; guessing another encoding could "
                             "change the values silently",
                         fix="convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or give numeric arrays as .npy") \
            from None


def _numeric(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def csv_rows(text: str, source: str = "the CSV input") -> list[Any]:
    """Rows of a CSV text: dicts when the first row is a header (any non-numeric cell), lists otherwise.
    A quote never closed, a cell over :data:`MAX_CELL` characters, or a row whose cell count differs
    from the header's is an :class:`InputError` naming the line."""
    previous = csv.field_size_limit()
    csv.field_size_limit(MAX_CELL)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if row and any(cell.strip() for cell in row):
                rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise InputError(f"{source}, line {reader.line_num + 1}: {exc}",
                         why="a damaged row would be read as something else, or rows would be lost",
                         fix="close the quote / split the cell; every row needs the same cells as the first") from None
    finally:
        csv.field_size_limit(previous)
    if not rows:
        return []
    first = rows[0][1]
    if all(_numeric(c) for c in first):
        header = None
        width = len(first)
    else:
        header = [h.strip() for h in first]
        width = len(header)
        rows = rows[1:]
    for line, row in rows:
        if len(row) != width:
            what = "the header's" if header else "the first row's"
            raise InputError(f"{source}, line {line}: {len(row)} cells, {what} {width}",
                             why="an extra or missing cell shifts every value after it into the wrong column",
                             fix="give every row exactly the columns of the header" if header else
                                 "give every row the same number of values")
    if header is None:
        return [row for _, row in rows]
    return [dict(zip(header, row)) for _, row in rows]


def npy_rows(path: str) -> list[Any]:
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise InputError(f"{path} is not a plain numeric .npy array: {exc}",
                         why="object arrays would need unpickling, which overt never does",
                         fix="save a numeric array with numpy.save") from None
    except (EOFError, OSError) as exc:
        raise InputError(f"{path} is not a readable .npy file: {exc or 'it is empty'}",
                         fix="save the inputs with numpy.save(path, array)") from None
    if not isinstance(array, np.ndarray):  # an .npz archive
        raise InputError(f"{path} is an .npz archive, not one .npy array", fix="give one array saved with numpy.save")
    return list(array) if array.ndim > 0 else [array]


def text_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def parse(text: str, fmt: str, source: str) -> list[Any]:
    return csv_rows(text, source) if fmt == "csv" else text_lines(text)


def _stdin_bytes(stdin: Any) -> bytes:
    if stdin is None:
        raise InputError("stdin is closed, and no inputs were given", fix="give input files, or pipe inputs in")
    stream: BinaryIO | None = getattr(stdin, "buffer", None)
    try:
        data = stream.read() if stream is not None else stdin.read()
    except (OSError, ValueError) as exc:
        raise InputError(f"stdin cannot be read: {exc}", fix="give input files, or pipe inputs in") from None
    return data.encode("utf-8") if isinstance(data, str) else data


def read_inputs(items: Iterable[str], fmt: str | None = None, stdin: Any = None) -> list[Any]:
    """Inputs from files (format by extension unless ``fmt``), ``-`` for stdin, or literal strings
    (an argument that is not a file); no items at all reads stdin."""
    items = list(items)
    stdin = stdin if stdin is not None else sys.stdin
    if not items:
        items = ["-"]
    out: list[Any] = []
    for item in items:
        if item == "-":
            if fmt == "npy":
                raise InputError("cannot read .npy arrays from stdin", fix="give the .npy file's path")
            out += parse(decode(_stdin_bytes(stdin), "stdin"), fmt or "text", "stdin")
            continue
        path = Path(item)
        if path.is_file():
            kind = fmt or format_of(item)
            if kind == "npy":
                out += npy_rows(item)
            else:
                try:
                    data = path.read_bytes()
                except OSError as exc:
                    raise InputError(f"input file {item} cannot be read: {exc.strerror or exc}") from None
                out += parse(decode(data, item), kind, item)
        elif path.suffix.lower() in (".csv", ".npy", ".txt", ".jsonl") or fmt in ("csv", "npy"):
            raise InputError(f"input file {item} does not exist", fix="check the path")
        else:
            out.append(item)  # a literal input, e.g. a sentence
    return out
